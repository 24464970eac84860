// Where Pi keeps its sessions, as the server resolves it (fabric.agentDir, else
// $PI_CODING_AGENT_DIR, else ~/.pi/agent; fabric.sessionDir, else <agentDir>/sessions):
// the extension starts its server at activation only when that directory exists, and
// syncs only the session JSONL files under it.
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';

function expand(p: string, home: string): string {
  if (p === '~') return home;
  if (p.startsWith('~/') || p.startsWith('~\\')) return path.join(home, p.slice(2));
  return p;
}

export interface PiDirs {
  agentDir: string;
  sessionDirs: string[];
  /** Where the agent dir came from, for the log. */
  source: string;
}

export interface PiDirInputs {
  agentDirSetting?: string | null;
  sessionDirSetting?: string | null;
  /** process.env merged with fabric.server.env (what the server process sees). */
  env: Record<string, string | undefined>;
  home?: string;
}

export function piDirs(inputs: PiDirInputs): PiDirs {
  const home = inputs.home ?? os.homedir();
  let agentDir: string;
  let source: string;
  if (inputs.agentDirSetting) {
    agentDir = expand(inputs.agentDirSetting, home);
    source = 'fabric.agentDir';
  } else if (inputs.env.PI_CODING_AGENT_DIR) {
    agentDir = expand(inputs.env.PI_CODING_AGENT_DIR, home);
    source = '$PI_CODING_AGENT_DIR';
  } else {
    agentDir = path.join(home, '.pi', 'agent');
    source = '~/.pi/agent';
  }
  agentDir = path.resolve(agentDir);
  const sessionDirs = [path.join(agentDir, 'sessions')];
  if (inputs.sessionDirSetting) sessionDirs.unshift(path.resolve(expand(inputs.sessionDirSetting, home)));
  return { agentDir, sessionDirs, source };
}

/** Whether Pi has been used here: the agent dir or a session dir exists. */
export function piDirExists(dirs: PiDirs): boolean {
  return [dirs.agentDir, ...dirs.sessionDirs].some((d) => {
    try { return fs.statSync(d).isDirectory(); } catch { return false; }
  });
}

/** Glob patterns (forward slashes, glob characters escaped) of the session JSONL files. */
export function sessionPatterns(dirs: PiDirs): string[] {
  const escape = (p: string) => p.replace(/\\/g, '/').replace(/[[\]{}()*?!]/g, (c) => `[${c}]`);
  return [...new Set(dirs.sessionDirs.map((d) => `${escape(d)}/**/*.jsonl`))];
}
