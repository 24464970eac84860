// The server the extension carries: server/<fabric_lsp wheel> + server/wheelhouse/ (built
// by scripts/bundle-server.mjs), installed on first use into a virtual environment in the
// extension's global storage with a Python >= 3.11. Dependencies come from the package
// index when it answers, else from the bundled wheelhouse (built for one platform).
// Every process runs in the extension's own directory (spawnDir.ts), and every
// interpreter run as `python -m …` / `-c …` gets `-I` (isolated: no current directory
// or script directory on sys.path, no PYTHON* variables, no user site-packages).
import { execFile } from 'node:child_process';
import * as crypto from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';
import * as vscode from 'vscode';
import { expandHome, programKind, spawnDir } from './spawnDir';

export const MIN_PYTHON: [number, number] = [3, 11];
const WIN = process.platform === 'win32';

export interface Bundle {
  dir: string;
  wheel: string;
  sha256: string;
  version: string;
  platform: string;
  pythons: string[];
  pip: string | null;
}

export interface PythonInfo {
  /** What to run (as found). */
  command: string;
  /** sys.executable */
  executable: string;
  version: string;
  source: string;
}

export interface Installed {
  fabricLsp: string;
  python: string;
  pythonVersion: string;
  /** `index` (pip could use the package index) or `wheelhouse` (offline, the bundled wheels). */
  from: 'index' | 'wheelhouse';
  sha256: string;
}

export function readBundle(extensionPath: string): Bundle | undefined {
  const dir = path.join(extensionPath, 'server');
  try {
    const m = JSON.parse(fs.readFileSync(path.join(dir, 'manifest.json'), 'utf8'));
    if (!fs.existsSync(path.join(dir, m.wheel))) return undefined;
    return { dir, wheel: m.wheel, sha256: m.sha256, version: m.version, platform: m.platform, pythons: m.pythons ?? [], pip: m.pip ?? null };
  } catch {
    return undefined;
  }
}

interface Run { code: number | null; stdout: string; stderr: string; error?: Error }

function run(command: string, args: string[], timeoutMs: number, env?: NodeJS.ProcessEnv): Promise<Run> {
  return new Promise((resolve) => {
    let cwd: string;
    try {
      cwd = spawnDir();
    } catch (err) {
      resolve({ code: null, stdout: '', stderr: '', error: err instanceof Error ? err : new Error(String(err)) });
      return;
    }
    execFile(command, args, { cwd, timeout: timeoutMs, maxBuffer: 16 * 1024 * 1024, env: env ?? process.env, windowsHide: true },
      (error, stdout, stderr) => {
        const code = error ? (typeof (error as any).code === 'number' ? (error as any).code : null) : 0;
        resolve({ code, stdout: String(stdout), stderr: String(stderr), error: error ?? undefined });
      });
  });
}

const PROBE = 'import sys; print(sys.executable); print("%d.%d.%d" % sys.version_info[:3])';

/** Ask an interpreter what it is; undefined when it does not run. */
export async function probePython(command: string, source: string): Promise<PythonInfo | undefined> {
  const res = await run(command, ['-I', '-c', PROBE], 15_000);
  if (res.code !== 0) return undefined;
  const [executable, version] = res.stdout.trim().split(/\r?\n/);
  if (!executable || !/^\d+\.\d+\.\d+$/.test(version ?? '')) return undefined;
  return { command, executable, version, source };
}

export function isSupported(version: string): boolean {
  const [major, minor] = version.split('.').map(Number);
  return major > MIN_PYTHON[0] || (major === MIN_PYTHON[0] && minor >= MIN_PYTHON[1]);
}

/**
 * An executable of this name on PATH, else undefined, always an absolute path: relative
 * PATH entries (`.`, `node_modules/.bin`) are skipped, they would name the project's files.
 */
export function onPath(name: string): string | undefined {
  const exts = WIN ? (process.env.PATHEXT ?? '.EXE;.CMD;.BAT').split(';') : [''];
  for (const dir of (process.env.PATH ?? '').split(path.delimiter)) {
    if (!dir || !path.isAbsolute(dir)) continue;
    for (const ext of exts) {
      const candidate = path.join(dir, name + ext);
      try {
        if (fs.statSync(candidate).isFile()) {
          if (!WIN) fs.accessSync(candidate, fs.constants.X_OK);
          return candidate;
        }
      } catch { /* next */ }
    }
  }
  return undefined;
}

/** The interpreter selected in the Python extension (`ms-python.python`), if installed. */
export async function pythonExtensionInterpreter(resource: vscode.Uri | undefined): Promise<string | undefined> {
  const ext = vscode.extensions.getExtension('ms-python.python');
  if (!ext) return undefined;
  try {
    const api = (ext.isActive ? ext.exports : await ext.activate()) as any;
    const envPath = api?.environments?.getActiveEnvironmentPath?.(resource);
    if (!envPath) return undefined;
    const resolved = await api.environments.resolveEnvironment?.(envPath);
    const exe = resolved?.executable?.uri?.fsPath ?? envPath.path;
    return typeof exe === 'string' && exe ? exe : undefined;
  } catch {
    return undefined; // optional: fall through to the setting and PATH
  }
}

const PATH_NAMES = WIN ? ['python3', 'python', 'py'] : ['python3.14', 'python3.13', 'python3.12', 'python3.11', 'python3', 'python'];

export interface PythonSearch {
  found?: PythonInfo;
  /** Every candidate looked at, with why it was not taken (for the log and the message). */
  tried: string[];
}

/**
 * `fabric.server.python` as a program to run: absolute (`~` expanded) or a name found on
 * PATH; undefined with the reason when it is neither (a relative path is refused).
 */
export function configuredPython(configured: string): { command?: string; problem?: string } {
  const kind = programKind(configured);
  if (kind === 'relative') {
    return { problem: `${configured} (setting fabric.server.python): a relative path; give an absolute path (or ~/…) or a name on PATH` };
  }
  if (kind === 'absolute') return { command: path.resolve(expandHome(configured)) };
  const found = onPath(configured);
  return found ? { command: found } : { problem: `${configured} (setting fabric.server.python): not found on PATH` };
}

/**
 * A Python >= 3.11: `fabric.server.python`, else the Python extension's selected
 * interpreter (only in a trusted workspace: there the workspace may choose it), else the
 * first good one on PATH. A configured interpreter that is not usable is reported, not
 * silently replaced.
 */
export async function findPython(resource: vscode.Uri | undefined, configured: string | undefined, trusted: boolean): Promise<PythonSearch> {
  const tried: string[] = [];
  const consider = async (command: string, source: string): Promise<PythonInfo | undefined> => {
    const info = await probePython(command, source);
    if (!info) { tried.push(`${command} (${source}): does not run`); return undefined; }
    if (!isSupported(info.version)) { tried.push(`${command} (${source}): Python ${info.version} < ${MIN_PYTHON.join('.')}`); return undefined; }
    return info;
  };
  if (configured) {
    const { command, problem } = configuredPython(configured);
    if (!command) return { tried: [problem!] };
    return { found: await consider(command, 'setting fabric.server.python'), tried };
  }
  const selected = trusted ? await pythonExtensionInterpreter(resource) : undefined;
  if (selected) {
    const info = await consider(selected, 'Python extension');
    if (info) return { found: info, tried };
  }
  const seen = new Set<string>();
  for (const name of PATH_NAMES) {
    const found = onPath(name);
    if (!found) continue;
    let real = found;
    try { real = fs.realpathSync(found); } catch { /* keep */ }
    if (seen.has(real)) continue;
    seen.add(real);
    const info = await consider(found, 'PATH');
    if (info) return { found: info, tried };
  }
  if (seen.size === 0) tried.push(`no ${PATH_NAMES.join(', ')} on PATH`);
  return { tried };
}

/** Other Pythons for the picker: PATH names plus the Python extension's choice (trusted workspace only). */
export async function listPythons(resource: vscode.Uri | undefined, trusted: boolean): Promise<PythonInfo[]> {
  const out: PythonInfo[] = [];
  const seen = new Set<string>();
  const add = async (command: string | undefined, source: string) => {
    if (!command) return;
    const info = await probePython(command, source);
    if (!info || seen.has(info.executable)) return;
    seen.add(info.executable);
    out.push(info);
  };
  if (trusted) await add(await pythonExtensionInterpreter(resource), 'Python extension');
  for (const name of PATH_NAMES) await add(onPath(name), 'PATH');
  return out;
}

function venvExe(venv: string, name: string): string {
  return WIN ? path.join(venv, 'Scripts', `${name}.exe`) : path.join(venv, 'bin', name);
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

/** pip's environment: quiet and non-interactive; the user's own pip configuration still applies. */
function pipEnv(): NodeJS.ProcessEnv {
  return { ...process.env, PIP_DISABLE_PIP_VERSION_CHECK: '1', PIP_NO_INPUT: '1', PYTHONDONTWRITEBYTECODE: undefined };
}

export class Installer {
  constructor(
    readonly bundle: Bundle,
    readonly storage: string,
    readonly log: vscode.LogOutputChannel,
  ) {}

  /** One install per wheel and interpreter: <storage>/server/<version>-<wheel sha>-<python hash>. */
  target(python: PythonInfo): string {
    const py = crypto.createHash('sha256').update(python.executable).digest('hex').slice(0, 8);
    return path.join(this.storage, 'server', `${this.bundle.version}-${this.bundle.sha256.slice(0, 12)}-${py}`);
  }

  /** The installed server for this interpreter, if it is complete. */
  installed(python: PythonInfo): Installed | undefined {
    try {
      const marker = JSON.parse(fs.readFileSync(path.join(this.target(python), 'installed.json'), 'utf8')) as Installed;
      return marker.sha256 === this.bundle.sha256 && fs.existsSync(marker.fabricLsp) ? marker : undefined;
    } catch {
      return undefined;
    }
  }

  /** Install (or find) the bundled server; waits for another window installing the same. */
  async ensure(python: PythonInfo, progress?: (message: string) => void): Promise<Installed> {
    const done = this.installed(python);
    if (done) return done;
    const target = this.target(python);
    const lock = `${target}.lock`;
    fs.mkdirSync(path.dirname(target), { recursive: true });
    for (let waited = 0; ; waited += 1000) {
      try {
        fs.mkdirSync(lock);
        break;
      } catch (err: any) {
        if (err?.code !== 'EEXIST') throw err;
        const age = Date.now() - fs.statSync(lock).mtimeMs;
        if (age > 10 * 60_000) { fs.rmSync(lock, { recursive: true, force: true }); continue; }
        progress?.('waiting for another window installing the server');
        await sleep(1000);
        const other = this.installed(python);
        if (other) return other;
        if (waited > 10 * 60_000) throw new Error(`another install holds ${lock}`);
      }
    }
    try {
      return await this.install(python, target, progress);
    } finally {
      fs.rmSync(lock, { recursive: true, force: true });
    }
  }

  private async install(python: PythonInfo, target: string, progress?: (message: string) => void): Promise<Installed> {
    const logFile = path.join(target, 'install.log');
    fs.rmSync(target, { recursive: true, force: true });
    fs.mkdirSync(target, { recursive: true });
    const note = (line: string) => {
      fs.appendFileSync(logFile, `${line}\n`);
      this.log.info(`[install] ${line}`);
    };
    const step = async (what: string, command: string, args: string[], timeoutMs: number): Promise<Run> => {
      note(`$ ${[command, ...args].join(' ')}`);
      const res = await run(command, args, timeoutMs, pipEnv());
      fs.appendFileSync(logFile, `${res.stdout}${res.stderr}${res.error && res.code !== 0 ? `${res.error.message}\n` : ''}exit ${res.code}\n`);
      if (res.code !== 0) this.log.warn(`[install] ${what} failed (exit ${res.code}): ${(res.stderr || res.error?.message || '').trim().split('\n').slice(-3).join(' | ')}`);
      return res;
    };
    note(`fabric-lsp ${this.bundle.version} (${this.bundle.wheel}) with Python ${python.version} ${python.executable} (${python.source})`);
    const venv = path.join(target, 'venv');
    const venvPython = venvExe(venv, 'python');
    progress?.(`creating a virtual environment with Python ${python.version}`);
    let pip = [venvPython, '-I', '-m', 'pip'];
    let made = await step('venv', python.command, ['-I', '-m', 'venv', venv], 180_000);
    if (made.code !== 0 && this.bundle.pip) {
      // No ensurepip (Debian without python3-venv): a venv without pip, run pip from its wheel.
      fs.rmSync(venv, { recursive: true, force: true });
      made = await step('venv --without-pip', python.command, ['-I', '-m', 'venv', '--without-pip', venv], 60_000);
      pip = [venvPython, '-I', path.join(this.bundle.dir, 'wheelhouse', this.bundle.pip, 'pip')];
    }
    if (made.code !== 0) throw new Error(`could not create a virtual environment with ${python.executable} (see ${logFile})`);
    const wheel = path.join(this.bundle.dir, this.bundle.wheel);
    const house = path.join(this.bundle.dir, 'wheelhouse');
    const common = ['install', '--no-input', '--prefer-binary', '--find-links', house];
    progress?.('installing fabric-lsp (package index, else the bundled wheels)');
    let from: Installed['from'] = 'index';
    let res = await step('pip install (index)', pip[0], [...pip.slice(1), ...common, '--retries', '1', '--timeout', '15', wheel], 600_000);
    if (res.code !== 0) {
      from = 'wheelhouse';
      progress?.('installing fabric-lsp from the bundled wheels (offline)');
      res = await step('pip install (wheelhouse)', pip[0], [...pip.slice(1), ...common, '--no-index', wheel], 600_000);
    }
    if (res.code !== 0) {
      throw new Error(`pip could not install fabric-lsp into ${venv}: neither the package index nor the bundled wheelhouse (built for ${this.bundle.platform}, Python ${this.bundle.pythons.join('/')}) had every dependency (see ${logFile})`);
    }
    // Where msgspec came from, for the log: pip says "Processing <wheelhouse>/msgspec-…" for a bundled wheel.
    if (from === 'index' && new RegExp(`Processing .*wheelhouse.*msgspec-`).test(res.stdout)) from = 'wheelhouse';
    const fabricLsp = venvExe(venv, 'fabric-lsp');
    const check = await step('fabric-lsp --version', fabricLsp, ['--version'], 60_000);
    if (check.code !== 0) throw new Error(`the installed server does not run: ${fabricLsp} --version failed (see ${logFile})`);
    const installed: Installed = { fabricLsp, python: python.executable, pythonVersion: python.version, from, sha256: this.bundle.sha256 };
    fs.writeFileSync(path.join(target, 'installed.json'), `${JSON.stringify(installed, null, 2)}\n`);
    note(`installed ${check.stdout.trim()} (dependencies from ${from === 'index' ? 'the package index' : 'the bundled wheelhouse'})`);
    this.prune(target);
    return installed;
  }

  /** Remove installs of other wheels (older extension versions); keep other interpreters' of this one. */
  private prune(keep: string): void {
    const root = path.dirname(keep);
    const prefix = `${this.bundle.version}-${this.bundle.sha256.slice(0, 12)}-`;
    for (const name of fs.readdirSync(root)) {
      if (name.startsWith(prefix) || name.endsWith('.lock')) continue;
      fs.rmSync(path.join(root, name), { recursive: true, force: true });
    }
  }

  /** Forget every install (Select Server… → Reinstall). */
  reset(): void {
    fs.rmSync(path.join(this.storage, 'server'), { recursive: true, force: true });
  }
}
