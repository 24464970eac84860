// End-to-end test of the server the VSIX carries: the packaged .vsix installed with
// `code-server --install-extension` into a fresh extensions dir, no fabric.server.command,
// and no fabric-lsp on PATH. The extension must install its bundled wheel into a venv in
// its global storage (with the Python on PATH), start it, and answer a recall.
//
//   node test/e2e/bundled.mjs --vsix dist/fabric-lsp.vsix --code-server PATH [--mode online|offline|no-python]
//
//   online     pip may use the package index (the machine's own pip configuration)
//   offline    no pip configuration and an unreachable index: everything must come from the
//              bundled wheelhouse
//   no-python  fabric.server.python names no interpreter: exactly one message, with the
//              "Select Server…" action, and a status bar item saying so
//
// Prints `ok - name` / `not ok - name` and `N passed, N failed`; exit 0/1.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { parseArgs } from 'node:util';
import { chromium } from 'playwright-core';
import { header, makeAgentDir } from '../fixtures.mjs';
import { startCodeServer } from './codeServer.mjs';
import { assert, clean, harness } from './harness.mjs';

const { values: opts } = parseArgs({
  options: {
    vsix: { type: 'string' },
    'code-server': { type: 'string' },
    chromium: { type: 'string', default: '/usr/bin/chromium' },
    screenshots: { type: 'string' },
    mode: { type: 'string', default: 'online' },
    keep: { type: 'boolean', default: false },
  },
});
if (!opts.vsix || !opts['code-server'] || !['online', 'offline', 'no-python'].includes(opts.mode)) {
  console.error('usage: bundled.mjs --vsix FILE --code-server PATH [--mode online|offline|no-python] [--screenshots DIR]');
  process.exit(2);
}

const STEP_MS = 30_000;
const INSTALL_MS = 240_000;
const started = Date.now();
const log = (msg) => console.log(`# [${((Date.now() - started) / 1000).toFixed(1)}s] ${msg}`);
const tmp = makeAgentDir(`fabric-bundled-${opts.mode}-`);
const failDir = path.join(tmp.root, 'failures');
const shotDir = opts.screenshots ? path.resolve(opts.screenshots) : path.join(tmp.root, 'shots');
fs.mkdirSync(failDir, { recursive: true });
fs.mkdirSync(shotDir, { recursive: true });

let page;
const ui = harness({ shotDir, failDir, stepMs: STEP_MS });
const { check, runCommand } = ui;


/** PATH without any directory holding a fabric-lsp (the point of this test). */
function pathWithoutFabric() {
  const dirs = ['/usr/local/bin', '/usr/bin', '/bin'].filter((d) => fs.existsSync(d) && !fs.existsSync(path.join(d, 'fabric-lsp')));
  return dirs.join(':');
}

/** Every file under dir whose name is `name`. */
function findFiles(dir, name, out = []) {
  if (!fs.existsSync(dir)) return out;
  for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) findFiles(p, name, out);
    else if (e.name === name) out.push(p);
  }
  return out;
}

let server;
let context;
const consoleErrors = [];
try {
  const PATH = pathWithoutFabric();
  const env = { PATH, FABRIC_LSP_COMMAND: undefined, VIRTUAL_ENV: undefined, PI_CODING_AGENT_DIR: undefined };
  if (opts.mode === 'offline') {
    // No pip configuration (no extra indexes or find-links) and an index that refuses connections.
    for (const k of Object.keys(process.env)) if (k.startsWith('PIP_')) env[k] = undefined;
    env.PIP_CONFIG_FILE = '/dev/null';
    env.PIP_INDEX_URL = 'http://127.0.0.1:9/simple/';
  }
  const settings = { 'fabric.agentDir': tmp.agentDir, 'fabric.recall.scope': 'global', 'fabric.recall.debounceMs': 150 };
  if (opts.mode === 'no-python') settings['fabric.server.python'] = path.join(tmp.root, 'no-such-python3');
  server = await startCodeServer({
    codeServer: opts['code-server'],
    node: process.execPath,
    root: path.join(tmp.root, 'cs'),
    vsix: path.resolve(opts.vsix),
    log,
    settings,
    env,
  });
  const storage = path.join(server.userData, 'User', 'globalStorage', 'fabric-lsp.fabric-lsp');
  log(`PATH for code-server: ${PATH} (plus node); mode ${opts.mode}`);

  await check('the VSIX is installed into the fresh extensions dir, with the server wheel and wheelhouse', async () => {
    const dirs = fs.readdirSync(server.extensions).filter((n) => n.startsWith('fabric-lsp.fabric-lsp-'));
    assert(dirs.length === 1, `extensions dir: ${fs.readdirSync(server.extensions).join(', ')}`);
    const manifest = JSON.parse(fs.readFileSync(path.join(server.extensions, dirs[0], 'server', 'manifest.json'), 'utf8'));
    assert(fs.existsSync(path.join(server.extensions, dirs[0], 'server', manifest.wheel)), 'the wheel is in the extension');
    assert(manifest.binaryWheels.some((n) => n.startsWith('msgspec-')), `msgspec in the wheelhouse: ${manifest.binaryWheels}`);
    const onPath = PATH.split(':').filter((d) => fs.existsSync(path.join(d, 'fabric-lsp')));
    assert(onPath.length === 0, `fabric-lsp on PATH in ${onPath}`);
  });

  context = await chromium.launchPersistentContext(path.join(tmp.root, 'chromium'), {
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
  await page.goto(`${server.url}/?folder=${encodeURIComponent(tmp.agentDir)}`, { timeout: 60_000 });
  await page.locator('.monaco-workbench').waitFor({ timeout: 60_000 });
  await page.locator('.statusbar').waitFor({ timeout: STEP_MS });

  if (opts.mode === 'no-python') {
    await check('no Python: one message with "Select Server…", and the status bar says so', async () => {
      await page.locator('.statusbar-item', { hasText: 'Fabric: no Python' }).first().waitFor({ timeout: 60_000 });
      const toast = page.locator('.notification-toast', { hasText: 'Python 3.11' });
      await toast.first().waitFor({ state: 'visible' });
      await page.waitForTimeout(3000); // a second message would have arrived by now
      const toasts = (await page.locator('.notification-toast').allInnerTexts()).map(clean).filter((t) => /fabric/i.test(t));
      assert(toasts.length === 1, `exactly one Fabric message: ${JSON.stringify(toasts)}`);
      assert(/fabric\.server\.python/.test(toasts[0]), `the message names the setting: ${toasts[0]}`);
      await toast.first().locator('.monaco-button', { hasText: 'Select Server…' }).waitFor({ state: 'visible' });
      if (opts.screenshots) await page.screenshot({ path: path.join(shotDir, 'vscode-no-python.png') });
      // The action opens the picker.
      await toast.first().locator('.monaco-button', { hasText: 'Select Server…' }).click();
      await page.locator('.quick-input-widget', { hasText: 'Bundled server' }).waitFor({ state: 'visible' });
      await page.keyboard.press('Escape');
    });
  } else {
    const ready = await check('the bundled server installs itself and starts (Fabric: ready)', async () => {
      await page.locator('.statusbar-item', { hasText: 'Fabric: ready' }).first().waitFor({ timeout: INSTALL_MS });
      const markers = findFiles(path.join(storage, 'server'), 'installed.json');
      assert(markers.length === 1, `one install in ${storage}: ${markers}`);
      const installed = JSON.parse(fs.readFileSync(markers[0], 'utf8'));
      assert(installed.fabricLsp.startsWith(storage), `the server runs from the extension's storage: ${installed.fabricLsp}`);
      const installLog = fs.readFileSync(path.join(path.dirname(markers[0]), 'install.log'), 'utf8');
      log(`installed with Python ${installed.pythonVersion}, dependencies from ${installed.from}`);
      if (opts.mode === 'offline') {
        assert(installed.from === 'wheelhouse', `offline: dependencies from the wheelhouse, not ${installed.from}\n${installLog.slice(-3000)}`);
        assert(/--no-index|Processing .*wheelhouse.*msgspec-/.test(installLog), `pip used the bundled wheels: ${installLog.slice(-3000)}`);
      }
    });
    if (!ready) throw new Error('the bundled server never became ready');

    await check('Recall… is answered by the bundled server', async () => {
      await runCommand('Fabric: Recall…');
      await page.locator('.quick-input-widget .quick-input-title', { hasText: 'Fabric: Recall' }).waitFor({ state: 'visible' });
      await page.locator('.quick-input-widget input').pressSequentially('rounding rules', { delay: 40 });
      const rows = page.locator('.quick-input-widget .quick-input-list .monaco-list-row', { hasText: /rounding rules/i });
      await rows.first().waitFor({ state: 'visible' });
      if (opts.screenshots) await page.screenshot({ path: path.join(shotDir, `vscode-bundled-server${opts.mode === 'offline' ? '-offline' : ''}.png`) });
      await page.keyboard.press('Escape');
    });

    await check('an entry reference in a file that is not synced gets its hover on demand', async () => {
      // notes.md is outside <agentDir>/sessions: the client never sends its text; the hover
      // asks the server with the file's URI only (src/bridge.ts).
      const id02 = header(tmp.files['02']).id;
      fs.writeFileSync(path.join(tmp.agentDir, 'notes.md'), `# Notes\n\nSee pi-entry:${id02}/662cb756 for the changelog.\n`);
      await page.keyboard.press('Control+p');
      await page.locator('.quick-input-widget input').fill('notes.md');
      await page.locator('.quick-input-list .monaco-list-row', { hasText: 'notes.md' }).first().waitFor({ state: 'visible' });
      await page.keyboard.press('Enter');
      const line = page.locator('.editor-group-container.active .view-lines .view-line', { hasText: 'pi-entry:' }).first();
      await line.waitFor({ state: 'visible' });
      const box = await line.evaluate((el) => {
        const walker = document.createTreeWalker(el, NodeFilter.SHOW_TEXT);
        for (let node = walker.nextNode(); node; node = walker.nextNode()) {
          const at = node.textContent.indexOf('pi-entry:');
          if (at >= 0) {
            const range = document.createRange();
            range.setStart(node, at);
            range.setEnd(node, Math.min(node.textContent.length, at + 20));
            const r = range.getBoundingClientRect();
            return { x: r.x, y: r.y, width: r.width, height: r.height };
          }
        }
        return null;
      });
      assert(box, 'the reference is on screen');
      const hover = page.locator('.monaco-hover-content');
      for (let attempt = 0; attempt < 4; attempt += 1) {
        await page.mouse.move(box.x + 2, box.y + box.height / 2);
        await page.mouse.move(box.x + box.width / 2, box.y + box.height / 2, { steps: 4 });
        try {
          await hover.filter({ hasText: '662cb756' }).first().waitFor({ state: 'visible', timeout: 5000 });
          break;
        } catch {
          await page.mouse.move(10, 10);
          await page.waitForTimeout(300);
        }
      }
      const text = clean(await hover.filter({ hasText: '662cb756' }).first().innerText());
      assert(/CHANGELOG/.test(text), `hover text: ${text.slice(0, 400)}`);
      await page.mouse.move(10, 10);
    });

    await check('the log says which server runs', async () => {
      await runCommand('Fabric: Show Log');
      const panel = page.locator('.part.panel .view-lines');
      await panel.first().waitFor({ state: 'visible' });
      const deadline = Date.now() + STEP_MS;
      let text = '';
      while (Date.now() < deadline) {
        // the line is near the top, the log follows its end: read it page by page from the top
        await panel.first().click().catch(() => undefined);
        await page.keyboard.press('Control+Home');
        text = '';
        for (let pageNo = 0; pageNo < 6 && !/from bundled server, Python 3\.\d+/.test(text); pageNo += 1) {
          text += `\n${clean(await panel.first().innerText().catch(() => ''))}`;
          await page.keyboard.press('PageDown');
        }
        if (/from bundled server, Python 3\.\d+/.test(text)) break;
        await page.waitForTimeout(300);
      }
      assert(/from bundled server, Python 3\.\d+/.test(text), `log: ${text.slice(0, 1500)}`);
      if (opts.screenshots && opts.mode === 'online') await page.screenshot({ path: path.join(shotDir, 'vscode-bundled-server-log.png') });
    });
  }
} catch (err) {
  ui.failed += 1;
  console.log('not ok - harness');
  console.log(String(err?.stack ?? err).split('\n').map((l) => `#   ${l}`).join('\n'));
} finally {
  for (const e of consoleErrors.filter((e) => /fabric|extension host|activat/i.test(e)).slice(0, 20)) console.log(`# console: ${e.slice(0, 400)}`);
  await context?.close().catch(() => undefined);
  await server?.stop().catch(() => undefined);
  const csLog = path.join(tmp.root, 'cs', 'code-server.log');
  if (ui.failed > 0 && fs.existsSync(csLog)) {
    console.log(fs.readFileSync(csLog, 'utf8').split('\n').slice(-30).map((l) => `# code-server: ${l}`).join('\n'));
  }
  if (!opts.keep && ui.failed === 0) tmp.cleanup();
  else console.log(`# kept ${tmp.root}`);
  console.log(`${ui.passed} passed, ${ui.failed} failed`);
  process.exit(ui.failed === 0 ? 0 : 1);
}
