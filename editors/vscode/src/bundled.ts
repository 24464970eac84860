// The server the extension carries: server/<universal fabric_lsp wheel> + server/wheelhouse/
// (built by scripts/bundle-server.mjs), installed on first use into a virtual environment in
// the extension's global storage. server/manifest.json lists the (target, Python) pairs the
// wheelhouse resolves offline (Linux glibc/musl, macOS and Windows on x64 and arm64, Python
// 3.11-3.14): the interpreter is chosen from those, and such a pair installs offline from
// the wheelhouse; any other Python >= 3.11 installs from the package index. A new server
// version (or wheel) installs into a new directory; the old ones are removed.
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
  /** Every Python (major.minor) some target resolves offline, newest last. */
  pythons: string[];
  /** Target (VS Code's platform names: linux-x64, alpine-arm64, darwin-arm64, win32-x64, …) → its Pythons. */
  targets: Record<string, string[]>;
  pip: string | null;
}

export interface PythonInfo {
  /** What to run (as found). */
  command: string;
  /** sys.executable */
  executable: string;
  version: string;
  source: string;
  /** The interpreter's platform in the manifest's terms (linux-x64, darwin-arm64, …), if known. */
  target?: string;
}

export interface Installed {
  fabricLsp: string;
  python: string;
  pythonVersion: string;
  /** `index` (pip could use the package index) or `wheelhouse` (offline, the bundled wheels). */
  from: 'index' | 'wheelhouse';
  sha256: string;
}

/** The bundle read at activation (readBundle): its manifest decides which Pythons are looked for. */
let bundle: Bundle | undefined;

export function readBundle(extensionPath: string): Bundle | undefined {
  const dir = path.join(extensionPath, 'server');
  try {
    const m = JSON.parse(fs.readFileSync(path.join(dir, 'manifest.json'), 'utf8'));
    if (typeof m.wheel !== 'string' || !fs.existsSync(path.join(dir, m.wheel))) return undefined;
    const targets: Record<string, string[]> = {};
    for (const [target, value] of Object.entries((m.targets ?? {}) as Record<string, any>)) {
      const pythons = Array.isArray(value?.pythons) ? value.pythons.filter((v: unknown) => typeof v === 'string') : [];
      if (pythons.length > 0) targets[target] = pythons;
    }
    const pythons = (Array.isArray(m.pythons) ? m.pythons as unknown[] : []).filter((v): v is string => typeof v === 'string');
    bundle = { dir, wheel: m.wheel, sha256: m.sha256, version: m.version, pythons, targets, pip: m.pip ?? null };
    return bundle;
  } catch {
    return undefined;
  }
}

/** `3.12.4` → `3.12`. */
export function minorOf(version: string): string {
  return version.split('.').slice(0, 2).join('.');
}

/**
 * An interpreter's platform in VS Code's target names, from Python's own `sys.platform`,
 * `platform.machine()` and `platform.libc_ver()` (so an x86_64 Python under Rosetta is
 * darwin-x64): linux-x64/-arm64 (glibc), alpine-x64/-arm64 (musl), darwin-x64/-arm64,
 * win32-x64/-arm64; otherwise `<sys.platform>-<machine>`, which no manifest lists.
 */
export function targetOf(sysPlatform: string, machine: string, libc: string): string {
  const m = machine.toLowerCase();
  const arch = m === 'x86_64' || m === 'amd64' ? 'x64' : m === 'aarch64' || m === 'arm64' ? 'arm64' : m;
  if (sysPlatform.startsWith('linux')) return `${libc === 'glibc' ? 'linux' : 'alpine'}-${arch}`;
  if (sysPlatform === 'darwin') return `darwin-${arch}`;
  if (sysPlatform === 'win32') return `win32-${arch}`;
  return `${sysPlatform}-${arch}`;
}

/** Whether the bundled wheelhouse installs the server offline for this interpreter. */
export function coveredOffline(b: Bundle | undefined, info: PythonInfo): boolean {
  return !!b && !!info.target && (b.targets[info.target] ?? []).includes(minorOf(info.version));
}

/** "3.11, 3.12, 3.13 or 3.14". */
function orList(items: string[]): string {
  return items.length <= 1 ? (items[0] ?? '') : `${items.slice(0, -1).join(', ')} or ${items[items.length - 1]}`;
}

/** The Pythons the bundle runs on, for messages: "Python 3.11, 3.12, 3.13 or 3.14". */
export function supportedText(b: Bundle | undefined): string {
  if (!b || b.pythons.length === 0) return `Python ${MIN_PYTHON.join('.')} or newer`;
  return `Python ${orList(b.pythons)}`;
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

const PROBE = [
  'import sys, platform',
  'print(sys.executable)',
  'print("%d.%d.%d" % sys.version_info[:3])',
  'print(sys.platform)',
  'print(platform.machine())',
  'print(platform.libc_ver()[0] if sys.platform.startswith("linux") else "")',
].join('; ');

/**
 * Ask an interpreter what it is; undefined when it does not run. `args` go before `-I`
 * (the Windows launcher's `-3.13`); a launcher is then replaced by the executable it ran.
 */
export async function probePython(command: string, source: string, args: string[] = []): Promise<PythonInfo | undefined> {
  const res = await run(command, [...args, '-I', '-c', PROBE], 15_000);
  if (res.code !== 0) return undefined;
  const [executable, version, sysPlatform, machine, libc] = res.stdout.trim().split(/\r?\n/);
  if (!executable || !/^\d+\.\d+\.\d+$/.test(version ?? '')) return undefined;
  const target = sysPlatform && machine !== undefined ? targetOf(sysPlatform, machine, libc ?? '') : undefined;
  return { command: args.length > 0 ? executable : command, executable, version, source, target };
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

/** Pythons looked for, newest first: the manifest's, else 3.11-3.14. */
function wantedMinors(b: Bundle | undefined): string[] {
  const listed = b && b.pythons.length > 0 ? b.pythons : ['3.11', '3.12', '3.13', '3.14'];
  return [...listed].sort((x, y) => Number(y.split('.')[1]) - Number(x.split('.')[1]));
}

interface Candidate { command: string; args: string[]; label: string }

/**
 * Where to look on PATH, in order: `python3.X` for each Python of the manifest (newest
 * first), then `python3` and `python`; on Windows the `py` launcher with `-3.X` for each,
 * then `python3` and `python`.
 */
function pathCandidates(b: Bundle | undefined): Candidate[] {
  const out: Candidate[] = [];
  const minors = wantedMinors(b);
  if (WIN) {
    const py = onPath('py');
    if (py) for (const v of minors) out.push({ command: py, args: [`-${v}`], label: `py -${v}` });
  } else {
    for (const v of minors) {
      const found = onPath(`python${v}`);
      if (found) out.push({ command: found, args: [], label: found });
    }
  }
  for (const name of ['python3', 'python']) {
    const found = onPath(name);
    if (found) out.push({ command: found, args: [], label: found });
  }
  return out;
}

export interface PythonSearch {
  found?: PythonInfo;
  /** Every candidate looked at, with why it was not taken (for the log and the message). */
  tried: string[];
  /**
   * When none was found: one sentence for the user saying which Pythons the bundled server
   * runs on and which were found, e.g. "the bundled server runs on Python 3.11, 3.12, 3.13 or
   * 3.14; found only Python 3.10.12 (/usr/bin/python3)".
   */
  summary?: string;
  /** The found interpreter installs offline from the bundled wheelhouse (else from the package index). */
  offline?: boolean;
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
 * The interpreter for the bundled server: `fabric.server.python` (taken as it is, if it runs
 * and is >= 3.11: the user's choice wins), else the Python extension's selected interpreter
 * (only in a trusted workspace: there the workspace may choose it), else the Pythons of the
 * manifest on PATH (python3.14 … python3.11, python3, python). Of those, the first that the
 * bundled wheelhouse installs offline is taken; else the first >= 3.11 (its dependencies then
 * come from the package index). A configured interpreter that is not usable is reported,
 * not silently replaced.
 */
export async function findPython(resource: vscode.Uri | undefined, configured: string | undefined, trusted: boolean,
  b: Bundle | undefined = bundle): Promise<PythonSearch> {
  const tried: string[] = [];
  const seen: PythonInfo[] = [];
  const consider = async (command: string, source: string, args: string[] = [], label = command): Promise<PythonInfo | undefined> => {
    const info = await probePython(command, source, args);
    if (!info) { tried.push(`${label} (${source}): does not run`); return undefined; }
    seen.push(info);
    if (!isSupported(info.version)) { tried.push(`${label} (${source}): Python ${info.version} < ${MIN_PYTHON.join('.')}`); return undefined; }
    return info;
  };
  const runsOn = `the bundled server runs on ${supportedText(b)}`;
  if (configured) {
    const { command, problem } = configuredPython(configured);
    if (!command) return { tried: [problem!], summary: `${problem}; ${runsOn}` };
    const info = await consider(command, 'setting fabric.server.python');
    if (!info) return { tried, summary: `fabric.server.python (${configured}) ${seen.length > 0 ? `is Python ${seen[0].version}` : 'does not run'}; ${runsOn}` };
    return { found: info, tried, offline: coveredOffline(b, info) };
  }
  const summary = () => {
    const found = seen.map((i) => `Python ${i.version} (${i.executable})`);
    return `${runsOn}; ${found.length > 0 ? `found only ${found.join(', ')}` : 'none was found (Python extension, PATH)'}`;
  };
  let fallback: PythonInfo | undefined;
  const take = (info: PythonInfo | undefined): PythonSearch | undefined => {
    if (!info) return undefined;
    if (coveredOffline(b, info)) return { found: info, tried, offline: true };
    tried.push(`${info.executable} (${info.source}): Python ${info.version} on ${info.target ?? 'an unknown platform'} is not in the bundled wheelhouse (would install from the package index)`);
    fallback ??= info;
    return undefined;
  };
  const selected = trusted ? await pythonExtensionInterpreter(resource) : undefined;
  if (selected) {
    const hit = take(await consider(selected, 'Python extension'));
    if (hit) return hit;
  }
  const real = new Set<string>();
  const candidates = pathCandidates(b);
  for (const c of candidates) {
    let key = `${c.command} ${c.args.join(' ')}`;
    try { key = `${fs.realpathSync(c.command)} ${c.args.join(' ')}`; } catch { /* keep */ }
    if (real.has(key)) continue;
    real.add(key);
    const hit = take(await consider(c.command, 'PATH', c.args, c.label));
    if (hit) return hit;
  }
  if (candidates.length === 0) tried.push(`no ${WIN ? 'py, python3, python' : `${wantedMinors(b).map((v) => `python${v}`).join(', ')}, python3, python`} on PATH`);
  if (fallback) return { found: fallback, tried, offline: false };
  return { tried, summary: summary() };
}

/**
 * Pythons for the picker: the Python extension's choice (trusted workspace only) and the
 * manifest's names on PATH; those the wheelhouse installs offline first.
 */
export async function listPythons(resource: vscode.Uri | undefined, trusted: boolean, b: Bundle | undefined = bundle): Promise<PythonInfo[]> {
  const out: PythonInfo[] = [];
  const seen = new Set<string>();
  const add = async (command: string | undefined, source: string, args: string[] = []) => {
    if (!command) return;
    const info = await probePython(command, source, args);
    if (!info || seen.has(info.executable)) return;
    seen.add(info.executable);
    out.push(info);
  };
  if (trusted) await add(await pythonExtensionInterpreter(resource), 'Python extension');
  for (const c of pathCandidates(b)) await add(c.command, 'PATH', c.args);
  return [...out.filter((i) => coveredOffline(b, i)), ...out.filter((i) => !coveredOffline(b, i))];
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
    const offline = coveredOffline(this.bundle, python);
    const where = `${python.target ?? 'this platform'}, Python ${minorOf(python.version)}`;
    note(offline ? `the bundled wheelhouse covers ${where}: installing offline`
      : `the bundled wheelhouse does not cover ${where} (it covers ${Object.entries(this.bundle.targets).map(([t, v]) => `${t} ${v.join('/')}`).join(', ')}): installing from the package index`);
    const fromWheelhouse = () => step('pip install (wheelhouse)', pip[0], [...pip.slice(1), ...common, '--no-index', wheel], 600_000);
    const fromIndex = () => step('pip install (index)', pip[0], [...pip.slice(1), ...common, '--retries', '1', '--timeout', '15', wheel], 600_000);
    let from: Installed['from'] = offline ? 'wheelhouse' : 'index';
    progress?.(offline ? 'installing fabric-lsp from the bundled wheels (offline)' : 'installing fabric-lsp (package index)');
    let res = await (offline ? fromWheelhouse() : fromIndex());
    if (res.code !== 0) {
      from = offline ? 'index' : 'wheelhouse';
      progress?.(offline ? 'installing fabric-lsp (package index)' : 'installing fabric-lsp from the bundled wheels (offline)');
      res = await (offline ? fromIndex() : fromWheelhouse());
    }
    if (res.code !== 0) {
      throw new Error(`pip could not install fabric-lsp into ${venv} for ${where}: neither the bundled wheelhouse nor the package index had every dependency (see ${logFile})`);
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
