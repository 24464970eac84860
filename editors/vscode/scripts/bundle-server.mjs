// Puts the fabric-lsp server into the extension: server/<fabric_lsp wheel>, and
// server/wheelhouse/ with every dependency as a wheel (msgspec for each Python 3.11-3.14
// of the platform this runs on, plus pip for interpreters whose venv has none) and
// server/manifest.json. The extension installs from these on first activation (src/bundled.ts).
//
//   node scripts/bundle-server.mjs [--python PY]
//
// PY (or $FABRIC_PYTHON, else the checkout's .venv/bin/python, else python3) builds the
// wheel with pip. Both steps are cached: the wheel by a hash of the package sources, the
// wheelhouse by a hash of the wheel's requirements, the platform and the Python list
// (in $FABRIC_VSCODE_TOOLS or <repo>/.tools/vscode/wheelhouse-cache), so a rebuild with
// unchanged inputs takes well under a second.
import { spawnSync } from 'node:child_process';
import * as crypto from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { parseArgs } from 'node:util';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const ext = path.resolve(here, '..');
const repo = path.resolve(ext, '..', '..');
const out = path.join(ext, 'server');
const PYTHONS = ['3.11', '3.12', '3.13', '3.14'];

const { values: opts } = parseArgs({ options: { python: { type: 'string' } } });
const python = opts.python ?? process.env.FABRIC_PYTHON
  ?? [path.join(repo, '.venv', 'bin', 'python'), path.join(repo, '.venv', 'Scripts', 'python.exe')].find((p) => fs.existsSync(p))
  ?? 'python3';
const cacheRoot = path.join(process.env.FABRIC_VSCODE_TOOLS ?? path.join(repo, '.tools', 'vscode'), 'wheelhouse-cache');
const t0 = Date.now();
const log = (msg) => console.error(`[bundle-server ${((Date.now() - t0) / 1000).toFixed(1)}s] ${msg}`);

function run(args, what) {
  const res = spawnSync(python, args, { cwd: repo, encoding: 'utf8', env: { ...process.env, PIP_DISABLE_PIP_VERSION_CHECK: '1' } });
  if (res.status !== 0) {
    console.error(res.stdout, res.stderr);
    throw new Error(`${what} failed (${python} ${args.join(' ')}): exit ${res.status ?? res.signal}${res.error ? ` ${res.error.message}` : ''}`);
  }
  return res.stdout;
}

function sha256(file) {
  return crypto.createHash('sha256').update(fs.readFileSync(file)).digest('hex');
}

/** A hash of everything that goes into the wheel. */
function sourceKey() {
  const h = crypto.createHash('sha256');
  const walk = (dir) => {
    for (const name of fs.readdirSync(dir).sort()) {
      if (name === '__pycache__' || name.endsWith('.pyc')) continue;
      const p = path.join(dir, name);
      const st = fs.statSync(p);
      if (st.isDirectory()) walk(p);
      else h.update(path.relative(repo, p)).update('\0').update(fs.readFileSync(p)).update('\0');
    }
  };
  walk(path.join(repo, 'fabric_lsp'));
  for (const f of ['pyproject.toml', 'README.md', 'LICENSE']) {
    if (fs.existsSync(path.join(repo, f))) h.update(f).update(fs.readFileSync(path.join(repo, f)));
  }
  return h.digest('hex').slice(0, 16);
}

function copyDir(from, to) {
  fs.rmSync(to, { recursive: true, force: true });
  fs.mkdirSync(to, { recursive: true });
  for (const name of fs.readdirSync(from)) fs.copyFileSync(path.join(from, name), path.join(to, name));
}

// 1. the fabric-lsp wheel
const key = sourceKey();
const wheelCache = path.join(cacheRoot, `wheel-${key}`);
if (!fs.existsSync(path.join(wheelCache, '.done'))) {
  log(`building the fabric-lsp wheel with ${python}`);
  fs.rmSync(wheelCache, { recursive: true, force: true });
  fs.mkdirSync(wheelCache, { recursive: true });
  run(['-m', 'pip', 'wheel', '--no-deps', '--quiet', '--wheel-dir', wheelCache, '.'], 'pip wheel');
  fs.writeFileSync(path.join(wheelCache, '.done'), '');
}
// Keep only this wheel's cache entry (the sources change with every edit).
for (const n of fs.readdirSync(cacheRoot)) {
  if (n.startsWith('wheel-') && n !== `wheel-${key}`) fs.rmSync(path.join(cacheRoot, n), { recursive: true, force: true });
}
const wheelName = fs.readdirSync(wheelCache).find((n) => /^fabric_lsp-.*\.whl$/.test(n));
if (!wheelName) throw new Error(`no fabric_lsp wheel in ${wheelCache}`);
const wheel = path.join(wheelCache, wheelName);

// 2. the wheelhouse: the wheel's requirements, for each Python of this platform
const requirements = run(['-c', [
  'import sys, zipfile',
  'z = zipfile.ZipFile(sys.argv[1])',
  'm = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))',
  'print("\\n".join(l for l in z.read(m).decode().splitlines() if l.startswith(("Requires-Dist:", "Requires-Python:"))))',
].join('\n'), wheel], 'reading the wheel metadata');
const platform = run(['-c', 'import sysconfig; print(sysconfig.get_platform())'], 'sysconfig').trim();
const houseKey = crypto.createHash('sha256').update([requirements, platform, PYTHONS.join(','), process.env.PIP_INDEX_URL ?? ''].join('\n')).digest('hex').slice(0, 16);
const houseCache = path.join(cacheRoot, `wheelhouse-${houseKey}`);
let pythons;
if (fs.existsSync(path.join(houseCache, '.done'))) {
  pythons = JSON.parse(fs.readFileSync(path.join(houseCache, '.done'), 'utf8'));
} else {
  log(`downloading the wheelhouse for ${platform}, Python ${PYTHONS.join(', ')}`);
  fs.rmSync(houseCache, { recursive: true, force: true });
  fs.mkdirSync(houseCache, { recursive: true });
  pythons = [];
  for (const v of PYTHONS) {
    const res = spawnSync(python, ['-m', 'pip', 'download', '--quiet', '--only-binary=:all:', '--python-version', v,
      '--dest', houseCache, wheel], { cwd: repo, encoding: 'utf8', env: { ...process.env, PIP_DISABLE_PIP_VERSION_CHECK: '1' } });
    if (res.status === 0) pythons.push(v);
    else log(`no wheels for Python ${v} (${(res.stderr || '').trim().split('\n').pop()}); skipped`);
  }
  if (pythons.length === 0) throw new Error('pip download found wheels for no Python version');
  // pip itself, for interpreters whose venv module cannot install it (Debian without python3-venv).
  run(['-m', 'pip', 'download', '--quiet', '--only-binary=:all:', '--no-deps', '--dest', houseCache, 'pip'], 'pip download pip');
  for (const n of fs.readdirSync(houseCache)) if (n.startsWith('fabric_lsp-')) fs.rmSync(path.join(houseCache, n));
  fs.writeFileSync(path.join(houseCache, '.done'), JSON.stringify(pythons));
}

// 3. server/ in the extension
fs.rmSync(out, { recursive: true, force: true });
fs.mkdirSync(out, { recursive: true });
fs.copyFileSync(wheel, path.join(out, wheelName));
copyDir(houseCache, path.join(out, 'wheelhouse'));
fs.rmSync(path.join(out, 'wheelhouse', '.done'), { force: true });
const wheels = fs.readdirSync(path.join(out, 'wheelhouse')).sort();
const binary = wheels.filter((n) => !n.endsWith('-none-any.whl'));
const manifest = {
  wheel: wheelName,
  sha256: sha256(wheel),
  version: wheelName.split('-')[1],
  platform,
  pythons,
  binaryWheels: binary,
  pip: wheels.find((n) => /^pip-.*\.whl$/.test(n)) ?? null,
  wheelhouse: wheels,
};
fs.writeFileSync(path.join(out, 'manifest.json'), `${JSON.stringify(manifest, null, 2)}\n`);
log(`server/: ${wheelName} + ${wheels.length} wheels (${binary.join(', ')}) for ${platform}, Python ${pythons.join(', ')}`);
