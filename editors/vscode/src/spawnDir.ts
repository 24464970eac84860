// The working directory of every process the extension starts (the server, the Python
// probes, venv and pip): a directory in the extension's own storage, never the project.
// `python -m …` puts its working directory first on sys.path, and a relative PATH entry
// resolves against it: run from a repository, either would run that repository's code.
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';

let dir: string | undefined;

/** Set once at activation (context.globalStorageUri's path). */
export function setSpawnDir(p: string | undefined): void {
  dir = p;
}

/** The directory, created (owner-only) when missing. */
export function spawnDir(): string {
  if (!dir) throw new Error('Fabric: internal error: no working directory for the server was set');
  fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
  return dir;
}

/** `~` and `~/…` expanded; anything else unchanged. */
export function expandHome(p: string, home = os.homedir()): string {
  if (p === '~') return home;
  if (p.startsWith('~/') || p.startsWith('~\\')) return path.join(home, p.slice(2));
  return p;
}

/**
 * How a configured program is named: `absolute` (after `~` expansion), a bare `name`
 * looked up on PATH, or `relative` (has a separator but is not absolute), which is refused:
 * relative to what? Never to the project.
 */
export function programKind(p: string): 'absolute' | 'name' | 'relative' {
  const expanded = expandHome(p);
  if (path.isAbsolute(expanded)) return 'absolute';
  return p.includes('/') || p.includes('\\') ? 'relative' : 'name';
}
