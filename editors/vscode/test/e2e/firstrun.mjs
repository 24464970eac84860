// End-to-end: README.md's first run in real VS Code (code-server + headless chromium),
// with a given Python first on PATH and no fabric-lsp anywhere on it:
//
//   PI_CODING_AGENT_DIR=<examples> code <examples>/projects/orbit
//
// The packaged .vsix is installed into a fresh extensions dir; the extension must choose
// that Python from its manifest, install its bundled server OFFLINE (no pip configuration,
// an unreachable index) from the VSIX's wheelhouse into a venv in its global storage, and
// then, on the examples' project (written beforehand by `fabric-lsp examples`), show the
// file-history CodeLens on orbit/tle.py and answer a recall.
//
//   node test/e2e/firstrun.mjs --vsix dist/fabric-lsp.vsix --code-server PATH --chromium PATH \
//     --python /path/to/python3.X --agent-dir <examples> --folder <examples>/projects/orbit
//
// Prints `ok - name` / `not ok - name` and `N passed, N failed`; exit 0/1.
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { parseArgs } from 'node:util';
import { chromium } from 'playwright-core';
import { startCodeServer } from './codeServer.mjs';
import { assert, clean, harness } from './harness.mjs';

const { values: opts } = parseArgs({
  options: {
    vsix: { type: 'string' },
    'code-server': { type: 'string' },
    chromium: { type: 'string', default: '/usr/bin/chromium' },
    python: { type: 'string' },
    'agent-dir': { type: 'string' },
    folder: { type: 'string' },
    screenshots: { type: 'string' },
    keep: { type: 'boolean', default: false },
  },
});
if (!opts.vsix || !opts['code-server'] || !opts.python || !opts['agent-dir'] || !opts.folder) {
  console.error('usage: firstrun.mjs --vsix FILE --code-server PATH --python PY --agent-dir DIR --folder DIR [--chromium PATH] [--screenshots DIR]');
  process.exit(2);
}

const STEP_MS = 30_000;
const INSTALL_MS = 240_000;
const started = Date.now();
const log = (msg) => console.log(`# [${((Date.now() - started) / 1000).toFixed(1)}s] ${msg}`);
const root = fs.mkdtempSync(path.join(os.tmpdir(), 'fabric-firstrun-'));
const failDir = path.join(root, 'failures');
fs.mkdirSync(failDir, { recursive: true });

let page;
const ui = harness({ shotDir: failDir, failDir, stepMs: STEP_MS });
const { check, runCommand } = ui;


function findFiles(dir, name, out = []) {
  if (!fs.existsSync(dir)) return out;
  for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) findFiles(p, name, out);
    else if (e.name === name) out.push(p);
  }
  return out;
}

const python = path.resolve(opts.python);
const probe = spawnSync(python, ['-I', '-c', 'import sys; print("%d.%d" % sys.version_info[:2])'], { encoding: 'utf8' });
const wanted = probe.stdout.trim();
let server;
let context;
const consoleErrors = [];
try {
  // The Python's own directory first, then the system's: no fabric-lsp on any of them.
  const PATH = [path.dirname(python), '/usr/local/bin', '/usr/bin', '/bin']
    .filter((d) => fs.existsSync(d) && !fs.existsSync(path.join(d, 'fabric-lsp'))).join(':');
  const env = {
    PATH, FABRIC_LSP_COMMAND: undefined, VIRTUAL_ENV: undefined,
    PI_CODING_AGENT_DIR: path.resolve(opts['agent-dir']),
    PIP_CONFIG_FILE: '/dev/null', PIP_INDEX_URL: 'http://127.0.0.1:9/simple/',
  };
  for (const k of Object.keys(process.env)) if (k.startsWith('PIP_') && !(k in env)) env[k] = undefined;
  // The extension host takes its environment from the user's login shell (/etc/profile
  // resets PATH on Debian), so the Python goes first on PATH the way users of pyenv and
  // the like do it: in ~/.profile.
  const home = path.join(root, 'cs', 'home');
  fs.mkdirSync(home, { recursive: true });
  fs.writeFileSync(path.join(home, '.profile'), `export PATH="${path.dirname(python)}:$PATH"\n`);
  server = await startCodeServer({
    codeServer: opts['code-server'],
    node: process.execPath,
    root: path.join(root, 'cs'),
    vsix: path.resolve(opts.vsix),
    log,
    settings: { 'fabric.recall.debounceMs': 150 },
    env,
  });
  const storage = path.join(server.userData, 'User', 'globalStorage', 'fabric-lsp.fabric-lsp');
  log(`Python ${wanted} (${python}) first on PATH: ${PATH}; offline`);

  context = await chromium.launchPersistentContext(path.join(root, 'chromium'), {
    executablePath: opts.chromium,
    headless: true,
    viewport: { width: 1360, height: 820 },
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
      '--disable-component-update', '--disable-sync', '--disable-dev-shm-usage'],
  });
  page = context.pages()[0] ?? await context.newPage();
  ui.page = page;
  page.setDefaultTimeout(STEP_MS);
  page.on('console', (msg) => { if (msg.type() === 'error') consoleErrors.push(msg.text()); });
  page.on('pageerror', (err) => consoleErrors.push(String(err)));
  await page.goto(`${server.url}/?folder=${encodeURIComponent(path.resolve(opts.folder))}`, { timeout: 60_000 });
  await page.locator('.monaco-workbench').waitFor({ timeout: 60_000 });
  await page.locator('.statusbar').waitFor({ timeout: STEP_MS });

  // Opening a source file of the project starts the extension (the CodeLens asks for it).
  await page.keyboard.press('Control+P');
  const input = page.locator('.quick-input-widget input');
  await input.waitFor({ state: 'visible' });
  await input.fill('orbit/tle.py');
  await page.locator('.quick-input-list .monaco-list-row', { hasText: 'tle.py' }).first().waitFor({ state: 'visible' });
  await page.keyboard.press('Enter');

  const ready = await check(`the bundled server installs offline with the Python first on PATH (${wanted})`, async () => {
    await page.locator('.statusbar-item', { hasText: 'Fabric: ready' }).first().waitFor({ timeout: INSTALL_MS });
    const markers = findFiles(path.join(storage, 'server'), 'installed.json');
    assert(markers.length === 1, `one install in ${storage}: ${markers}`);
    const installed = JSON.parse(fs.readFileSync(markers[0], 'utf8'));
    const installLog = fs.readFileSync(path.join(path.dirname(markers[0]), 'install.log'), 'utf8');
    log(`installed with Python ${installed.pythonVersion} (${installed.python}), dependencies from ${installed.from}`);
    assert(installed.pythonVersion.startsWith(`${wanted}.`), `Python ${installed.pythonVersion}, not ${wanted}`);
    assert(fs.realpathSync(installed.python) === fs.realpathSync(python), `interpreter ${installed.python}, not ${python}`);
    assert(installed.from === 'wheelhouse', `dependencies from ${installed.from}\n${installLog.slice(-3000)}`);
    assert(/the bundled wheelhouse covers linux-x64, Python/.test(installLog), `install log: ${installLog.slice(0, 2000)}`);
    assert(/--no-index/.test(installLog), 'pip ran with --no-index');
    assert(installed.fabricLsp.startsWith(storage), `the server runs from the extension's storage: ${installed.fabricLsp}`);
  });
  if (!ready) throw new Error('the bundled server never became ready');

  await check('orbit/tle.py of the examples\' project shows the file-history CodeLens', async () => {
    const lens = page.locator('.editor-group-container.active .codelens-decoration a', { hasText: /^Pi: \d+ sessions?/ }).first();
    await lens.waitFor({ state: 'visible', timeout: 60_000 });
    const title = clean(await lens.innerText());
    assert(/^Pi: 3 sessions · edited in 01a18ac0/.test(title), `lens title: ${title}`);
    if (opts.screenshots) await page.screenshot({ path: path.join(path.resolve(opts.screenshots), `vscode-firstrun-${wanted}.png`) });
    await lens.click();
    const rows = page.locator('.quick-input-list .monaco-list-row');
    await rows.first().waitFor({ state: 'visible' });
    const items = (await rows.allInnerTexts()).map(clean);
    assert(items.some((t) => /edit/.test(t)) && items.some((t) => /read/.test(t)), `history items: ${items.join(' | ')}`);
    await page.keyboard.press('Escape');
  });

  await check('Recall… is answered by the bundled server', async () => {
    await runCommand('Fabric: Recall…');
    await page.locator('.quick-input-widget .quick-input-title', { hasText: 'Fabric: Recall' }).waitFor({ state: 'visible' });
    await page.locator('.quick-input-widget input').pressSequentially('convert_anomaly', { delay: 40 });
    const rows = page.locator('.quick-input-widget .quick-input-list .monaco-list-row', { hasText: /convert_anomaly/ });
    await rows.first().waitFor({ state: 'visible' });
    await page.keyboard.press('Escape');
  });
} catch (err) {
  ui.failed += 1;
  console.log('not ok - harness');
  console.log(String(err?.stack ?? err).split('\n').map((l) => `#   ${l}`).join('\n'));
} finally {
  for (const e of consoleErrors.filter((e) => /fabric|extension host|activat/i.test(e)).slice(0, 20)) console.log(`# console: ${e.slice(0, 400)}`);
  await context?.close().catch(() => undefined);
  await server?.stop().catch(() => undefined);
  const csLog = path.join(root, 'cs', 'code-server.log');
  if (ui.failed > 0 && fs.existsSync(csLog)) {
    console.log(fs.readFileSync(csLog, 'utf8').split('\n').slice(-30).map((l) => `# code-server: ${l}`).join('\n'));
  }
  if (!opts.keep && ui.failed === 0) fs.rmSync(root, { recursive: true, force: true });
  else console.log(`# kept ${root}`);
  console.log(`${ui.passed} passed, ${ui.failed} failed`);
  process.exit(ui.failed === 0 ? 0 : 1);
}
