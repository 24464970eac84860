// Puts the fabric-lsp server into the extension, for every platform and Python at once:
//
//   server/fabric_lsp-<version>-py3-none-any.whl   the universal server wheel (pure Python:
//                                                  the C accelerator of the tokenizer is left
//                                                  out, the pure-Python path gives the same results)
//   server/wheelhouse/                             its dependencies as wheels, for each target
//                                                  below and each Python 3.11-3.14 (msgspec is
//                                                  the one binary dependency), plus pip itself
//   server/manifest.json                           what is there, and the (target, Python) pairs
//                                                  the wheelhouse resolves offline
//
// The extension installs from these on first activation (src/bundled.ts): offline when the
// manifest lists its (target, Python), else from the package index with the wheelhouse as
// extra links.
//
//   node scripts/bundle-server.mjs [--python PY]
//
// PY (or $FABRIC_PYTHON, else the checkout's .venv/bin/python, else python3) runs pip. The
// wheelhouse comes from `pip download --only-binary=:all: --platform … --python-version …`
// per pair; every listed pair is then checked with `pip install --dry-run --no-index
// --find-links wheelhouse` for that platform and Python, and only pairs that resolve are
// listed. Both steps are cached: the wheel by a hash of the package sources, the wheelhouse
// by a hash of the wheel's requirements, the targets and the Pythons (in
// $FABRIC_VSCODE_TOOLS or <repo>/.tools/vscode/wheelhouse-cache), so a rebuild with
// unchanged inputs takes well under a second.
import { spawnSync } from 'node:child_process';
import * as crypto from 'node:crypto';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { parseArgs } from 'node:util';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const ext = path.resolve(here, '..');
const repo = path.resolve(ext, '..', '..');
const out = path.join(ext, 'server');
export const PYTHONS = ['3.11', '3.12', '3.13', '3.14'];
/**
 * Targets in VS Code's platform names, with the pip platform tags a machine of that kind
 * accepts (glibc >= 2.17, musl >= 1.2, macOS >= 11, Windows 10+). `pip --platform
 * macosx_11_0_x86_64` also accepts the older macosx_10_x wheels.
 */
export const TARGETS = {
  'linux-x64': ['manylinux_2_17_x86_64', 'manylinux2014_x86_64'],
  'linux-arm64': ['manylinux_2_17_aarch64', 'manylinux2014_aarch64'],
  'alpine-x64': ['musllinux_1_2_x86_64'],
  'alpine-arm64': ['musllinux_1_2_aarch64'],
  'darwin-x64': ['macosx_11_0_x86_64'],
  'darwin-arm64': ['macosx_11_0_arm64'],
  'win32-x64': ['win_amd64'],
  'win32-arm64': ['win_arm64'],
};

const { values: opts } = parseArgs({ options: { python: { type: 'string' } } });
const python = opts.python ?? process.env.FABRIC_PYTHON
  ?? [path.join(repo, '.venv', 'bin', 'python'), path.join(repo, '.venv', 'Scripts', 'python.exe')].find((p) => fs.existsSync(p))
  ?? 'python3';
const cacheRoot = path.join(process.env.FABRIC_VSCODE_TOOLS ?? path.join(repo, '.tools', 'vscode'), 'wheelhouse-cache');
const t0 = Date.now();
const log = (msg) => console.error(`[bundle-server ${((Date.now() - t0) / 1000).toFixed(1)}s] ${msg}`);
const pipEnv = { ...process.env, PIP_DISABLE_PIP_VERSION_CHECK: '1', PIP_NO_INPUT: '1' };

function spawn(args, extraEnv = {}, cwd = repo, base = pipEnv) {
  return spawnSync(python, args, { cwd, encoding: 'utf8', env: { ...base, ...extraEnv }, maxBuffer: 64 * 1024 * 1024 });
}

/** pip with no configuration at all (no pip.conf, no PIP_* variables): what the wheelhouse alone resolves. */
const bareEnv = Object.fromEntries(Object.entries(pipEnv).filter(([k]) => !k.startsWith('PIP_')));
Object.assign(bareEnv, { PIP_CONFIG_FILE: os.devnull, PIP_DISABLE_PIP_VERSION_CHECK: '1', PIP_NO_INPUT: '1' });

function run(args, what, extraEnv = {}, cwd = repo) {
  const res = spawn(args, extraEnv, cwd);
  if (res.status !== 0) {
    console.error(res.stdout, res.stderr);
    throw new Error(`${what} failed (${python} ${args.join(' ')}): exit ${res.status ?? res.signal}${res.error ? ` ${res.error.message}` : ''}`);
  }
  return res.stdout;
}

function lastLine(res) {
  return (res.stderr || res.stdout || res.error?.message || '').trim().split('\n').pop();
}

function sha256(file) {
  return crypto.createHash('sha256').update(fs.readFileSync(file)).digest('hex');
}

const SKIP = (name) => name === '__pycache__' || name.endsWith('.pyc') || name.endsWith('.so') || name.endsWith('.pyd');
const BUILD_FILES = ['pyproject.toml', 'setup.py', 'README.md', 'LICENSE'];

/** A hash of everything that goes into the wheel. */
function sourceKey() {
  const h = crypto.createHash('sha256');
  const walk = (dir) => {
    for (const name of fs.readdirSync(dir).sort()) {
      if (SKIP(name)) continue;
      const p = path.join(dir, name);
      const st = fs.statSync(p);
      if (st.isDirectory()) walk(p);
      else h.update(path.relative(repo, p)).update('\0').update(fs.readFileSync(p)).update('\0');
    }
  };
  walk(path.join(repo, 'fabric_lsp'));
  for (const f of BUILD_FILES) {
    if (fs.existsSync(path.join(repo, f))) h.update(f).update(fs.readFileSync(path.join(repo, f)));
  }
  return h.digest('hex').slice(0, 16);
}

/** The package sources copied to a scratch dir: building in the checkout would leave build/ there (and stale files in it). */
function sourceCopy() {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'fabric-wheel-'));
  fs.cpSync(path.join(repo, 'fabric_lsp'), path.join(dir, 'fabric_lsp'), { recursive: true, filter: (src) => !SKIP(path.basename(src)) });
  for (const f of BUILD_FILES) if (fs.existsSync(path.join(repo, f))) fs.copyFileSync(path.join(repo, f), path.join(dir, f));
  return dir;
}

function copyDir(from, to) {
  fs.rmSync(to, { recursive: true, force: true });
  fs.mkdirSync(to, { recursive: true });
  for (const name of fs.readdirSync(from)) fs.copyFileSync(path.join(from, name), path.join(to, name));
}

const platformArgs = (tags) => tags.flatMap((t) => ['--platform', t]);

fs.mkdirSync(cacheRoot, { recursive: true });

// 1. the universal fabric-lsp wheel
const key = sourceKey();
const wheelCache = path.join(cacheRoot, `wheel-${key}`);
if (!fs.existsSync(path.join(wheelCache, '.done'))) {
  log(`building the universal fabric-lsp wheel with ${python}`);
  fs.rmSync(wheelCache, { recursive: true, force: true });
  fs.mkdirSync(wheelCache, { recursive: true });
  const src = sourceCopy();
  try {
    run(['-m', 'pip', 'wheel', '--no-deps', '--quiet', '--wheel-dir', wheelCache, '.'], 'pip wheel', { FABRIC_LSP_PURE: '1' }, src);
  } finally {
    fs.rmSync(src, { recursive: true, force: true });
  }
  fs.writeFileSync(path.join(wheelCache, '.done'), '');
}
// Keep only this wheel's cache entry (the sources change with every edit).
for (const n of fs.readdirSync(cacheRoot)) {
  if (n.startsWith('wheel-') && n !== `wheel-${key}`) fs.rmSync(path.join(cacheRoot, n), { recursive: true, force: true });
}
const wheelName = fs.readdirSync(wheelCache).find((n) => /^fabric_lsp-.*\.whl$/.test(n));
if (!wheelName) throw new Error(`no fabric_lsp wheel in ${wheelCache}`);
if (!wheelName.endsWith('-py3-none-any.whl')) {
  throw new Error(`${wheelName} is not the universal wheel (py3-none-any): setup.py must leave the accelerator out under FABRIC_LSP_PURE=1`);
}
const wheel = path.join(wheelCache, wheelName);

// 2. the wheelhouse: the wheel's requirements, for every target and Python
const requirements = run(['-I', '-c', [
  'import sys, zipfile',
  'z = zipfile.ZipFile(sys.argv[1])',
  'm = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))',
  'print("\\n".join(l for l in z.read(m).decode().splitlines() if l.startswith(("Requires-Dist:", "Requires-Python:"))))',
].join('\n'), wheel], 'reading the wheel metadata');
const builtOn = run(['-I', '-c', 'import sysconfig; print(sysconfig.get_platform())'], 'sysconfig').trim();
const houseKey = crypto.createHash('sha256')
  .update([requirements, JSON.stringify(TARGETS), PYTHONS.join(','), process.env.PIP_INDEX_URL ?? ''].join('\n')).digest('hex').slice(0, 16);
const houseCache = path.join(cacheRoot, `wheelhouse-${houseKey}`);
let targets;
if (fs.existsSync(path.join(houseCache, '.done'))) {
  targets = JSON.parse(fs.readFileSync(path.join(houseCache, '.done'), 'utf8'));
} else {
  log(`downloading the wheelhouse: ${Object.keys(TARGETS).length} targets x Python ${PYTHONS.join(', ')}`);
  fs.rmSync(houseCache, { recursive: true, force: true });
  fs.mkdirSync(houseCache, { recursive: true });
  for (const [target, tags] of Object.entries(TARGETS)) {
    for (const v of PYTHONS) {
      const res = spawn(['-m', 'pip', 'download', '--quiet', '--only-binary=:all:', ...platformArgs(tags), '--python-version', v,
        '--implementation', 'cp', '--dest', houseCache, wheel]);
      if (res.status !== 0) log(`${target} Python ${v}: no wheels (${lastLine(res)}); not listed`);
    }
  }
  // pip itself, for interpreters whose venv module cannot install it (Debian without python3-venv).
  run(['-m', 'pip', 'download', '--quiet', '--only-binary=:all:', '--no-deps', '--dest', houseCache, 'pip'], 'pip download pip');
  for (const n of fs.readdirSync(houseCache)) if (n.startsWith('fabric_lsp-')) fs.rmSync(path.join(houseCache, n));
  // What resolves offline, from the wheelhouse alone: only these pairs go into the manifest.
  log('checking that each (target, Python) resolves offline from the wheelhouse');
  const scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'fabric-resolve-'));
  targets = {};
  try {
    for (const [target, tags] of Object.entries(TARGETS)) {
      const ok = [];
      for (const v of PYTHONS) {
        const res = spawn(['-m', 'pip', 'install', '--dry-run', '--quiet', '--ignore-installed', '--no-index', '--find-links', houseCache,
          '--only-binary=:all:', ...platformArgs(tags), '--python-version', v, '--implementation', 'cp',
          '--target', path.join(scratch, `${target}-${v}`), wheel], {}, repo, bareEnv);
        if (res.status === 0) ok.push(v);
        else log(`${target} Python ${v} does not resolve offline (${lastLine(res)}); not listed`);
      }
      if (ok.length > 0) targets[target] = { pythons: ok, pipPlatforms: tags };
    }
  } finally {
    fs.rmSync(scratch, { recursive: true, force: true });
  }
  if (Object.keys(targets).length === 0) throw new Error('the wheelhouse resolves for no target and Python');
  fs.writeFileSync(path.join(houseCache, '.done'), JSON.stringify(targets));
}
for (const n of fs.readdirSync(cacheRoot)) {
  if (n.startsWith('wheelhouse-') && n !== `wheelhouse-${houseKey}`) fs.rmSync(path.join(cacheRoot, n), { recursive: true, force: true });
}

// 3. server/ in the extension
fs.rmSync(out, { recursive: true, force: true });
fs.mkdirSync(out, { recursive: true });
fs.copyFileSync(wheel, path.join(out, wheelName));
copyDir(houseCache, path.join(out, 'wheelhouse'));
fs.rmSync(path.join(out, 'wheelhouse', '.done'), { force: true });
const wheels = fs.readdirSync(path.join(out, 'wheelhouse')).sort();
const binary = wheels.filter((n) => !n.endsWith('-none-any.whl'));
const pythons = PYTHONS.filter((v) => Object.values(targets).some((t) => t.pythons.includes(v)));
const manifest = {
  wheel: wheelName,
  sha256: sha256(wheel),
  version: wheelName.split('-')[1],
  requiresPython: (requirements.match(/^Requires-Python:\s*(.+)$/m)?.[1] ?? '').trim(),
  // Every Python some target resolves; `targets` says which for which platform.
  pythons,
  targets,
  // The wheel is pure Python; no accelerator is carried (a checkout or sdist install builds it).
  accelerator: false,
  builtOn,
  binaryWheels: binary,
  pip: wheels.find((n) => /^pip-.*\.whl$/.test(n)) ?? null,
  wheelhouse: wheels,
};
fs.writeFileSync(path.join(out, 'manifest.json'), `${JSON.stringify(manifest, null, 2)}\n`);
const summary = Object.entries(targets).map(([t, { pythons: p }]) => `${t} ${p.join('/')}`).join(', ');
log(`server/: ${wheelName} + ${wheels.length} wheels (${binary.length} binary); offline: ${summary}`);
