// Shared test setup: a temporary Pi agent directory holding copies of the real-Pi
// session fixtures, laid out as Pi does (<agentDir>/sessions/<encoded cwd>/*.jsonl).
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';

export const extensionDir = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
export const repoRoot = path.resolve(extensionDir, '..', '..');
export const fixturesDir = path.join(repoRoot, 'tests', 'fixtures', 'real-sessions');
export const PROJECT_CWD = '/home/user/proj';

/** The server command: $FABRIC_LSP_COMMAND (JSON array or a path), else the repo venv's. */
export function serverCommand() {
  const env = process.env.FABRIC_LSP_COMMAND;
  if (env) return env.trim().startsWith('[') ? JSON.parse(env) : [env];
  return [path.join(repoRoot, '.venv', 'bin', 'fabric-lsp')];
}

/** Pi's per-cwd folder name (see engine/session/discovery.py). */
export function encodeCwd(cwd) {
  return `--${cwd.replace(/^[/\\]/, '').replace(/[/\\:]/g, '-')}--`;
}

export function makeAgentDir(prefix = 'fabric-vscode-') {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
  const agentDir = path.join(root, 'agent');
  const sessionDir = path.join(agentDir, 'sessions', encodeCwd(PROJECT_CWD));
  fs.mkdirSync(sessionDir, { recursive: true });
  const files = {};
  for (const name of fs.readdirSync(fixturesDir).filter((n) => n.endsWith('.jsonl')).sort()) {
    fs.copyFileSync(path.join(fixturesDir, name), path.join(sessionDir, name));
    files[name.slice(0, 2)] = path.join(sessionDir, name);
  }
  // Pi's own settings: keep a small recent tail, so the fixture sessions (~20k tokens)
  // have something to compact (Pi's default keeps the last 20k tokens).
  fs.writeFileSync(path.join(agentDir, 'settings.json'), `${JSON.stringify({ compaction: { keepRecentTokens: 4000 } })}\n`);
  return { root, agentDir, sessionDir, files, cleanup: () => fs.rmSync(root, { recursive: true, force: true }) };
}

export function readLines(file) {
  return fs.readFileSync(file, 'utf8').split('\n').filter((l) => l.length > 0);
}

export function header(file) {
  return JSON.parse(readLines(file)[0]);
}
