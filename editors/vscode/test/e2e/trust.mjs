// Workspace trust in real VS Code (code-server + headless chromium, fresh profile): a
// cloned repository whose .vscode/settings.json names fabric.indexDir, fabric.agentDir,
// fabric.sessionDir and fabric.server.command, opened in Restricted Mode, reaches the
// server as nothing (the server's own effective configuration says so, the directory the
// workspace named as indexDir is untouched, the workspace's server command never runs).
// Then the workspace is trusted through VS Code's Workspace Trust editor, and the same
// values do reach the server (so the first half can fail).
//
//   node test/e2e/trust.mjs --vsix dist/fabric-lsp.vsix --code-server PATH [--screenshots DIR]
//
// Prints `ok - name` / `not ok - name` per check and `N passed, N failed`; exit 0/1.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { parseArgs } from 'node:util';
import { chromium } from 'playwright-core';
import { makeAgentDir, serverCommand } from '../fixtures.mjs';
import { startCodeServer } from './codeServer.mjs';
import { assert, clean, harness } from './harness.mjs';

const { values: opts } = parseArgs({
  options: {
    vsix: { type: 'string' },
    'code-server': { type: 'string' },
    chromium: { type: 'string', default: '/usr/bin/chromium' },
    screenshots: { type: 'string' },
    keep: { type: 'boolean', default: false },
  },
});
if (!opts.vsix || !opts['code-server']) {
  console.error('usage: trust.mjs --vsix FILE --code-server PATH [--screenshots DIR]');
  process.exit(2);
}

const STEP_MS = 30_000;
const started = Date.now();
const log = (msg) => console.log(`# [${((Date.now() - started) / 1000).toFixed(1)}s] ${msg}`);

const tmp = makeAgentDir('fabric-trust-');
const failDir = path.join(tmp.root, 'failures');
const shotDir = opts.screenshots ? path.resolve(opts.screenshots) : path.join(tmp.root, 'shots');
fs.mkdirSync(failDir, { recursive: true });
fs.mkdirSync(shotDir, { recursive: true });

// The hostile repository. Its indexDir is a directory of the user's that holds JSON
// files and a `*.json` folder (what the index cleanup used to delete), outside the repo.
const repo = path.join(tmp.root, 'cloned-repo');
const victim = path.join(tmp.root, 'home-like');
const evilAgent = path.join(repo, 'evil-agent');
const evilSessions = path.join(repo, 'evil-sessions');
const ranMarker = path.join(tmp.root, 'workspace-server-command-ran');
fs.mkdirSync(path.join(repo, '.vscode'), { recursive: true });
fs.mkdirSync(path.join(victim, 'backup.json'), { recursive: true });
fs.writeFileSync(path.join(victim, 'settings.json'), '{"editor.fontSize": 14}\n');
fs.writeFileSync(path.join(victim, 'keybindings.json'), '[]\n');
fs.writeFileSync(path.join(victim, 'backup.json', 'photo.jpg'), Buffer.from([0xff, 0xd8, 0xff, 0xe0, 1, 2, 3]));
fs.chmodSync(victim, 0o755);
// The repository's own "global" Fabric layer, if its agentDir were taken.
fs.mkdirSync(evilAgent, { recursive: true });
fs.writeFileSync(path.join(evilAgent, 'fabric.json'), `${JSON.stringify({ memory: { maxSessions: 3 } })}\n`);
// The repository's server command: records that it ran, then runs the real server (so a
// trusted workspace still gets a working server and the test can read what it received).
const real = serverCommand();
const wrapper = path.join(repo, 'evil-server.sh');
fs.writeFileSync(wrapper, `#!/bin/sh\npwd -P >> '${ranMarker}'\nexec ${real.map((a) => `'${a}'`).join(' ')} "$@"\n`);
fs.chmodSync(wrapper, 0o755);
fs.writeFileSync(path.join(repo, '.vscode', 'settings.json'), `${JSON.stringify({
  'fabric.indexDir': victim,
  'fabric.agentDir': evilAgent,
  'fabric.sessionDir': evilSessions,
  'fabric.server.command': [wrapper],
  'fabric.server.env': { PI_CODING_AGENT_DIR: evilAgent },
  // Not restricted: a workspace may still tune this one in Restricted Mode.
  'fabric.compaction.commitQuietMs': 4321,
}, null, 2)}\n`);

/** Names, bytes and modes of everything under `dir` (lstat: links are not followed). */
function snapshot(dir) {
  const out = {};
  const walk = (p, rel) => {
    const st = fs.lstatSync(p);
    out[rel] = { mode: st.mode, bytes: st.isFile() ? fs.readFileSync(p).toString('base64') : null };
    if (st.isDirectory()) for (const name of fs.readdirSync(p).sort()) walk(path.join(p, name), `${rel}/${name}`);
  };
  walk(dir, '.');
  return JSON.stringify(out);
}
const victimBefore = snapshot(victim);
const repoBefore = snapshot(repo);

let page;
const ui = harness({ shotDir, failDir, stepMs: STEP_MS });
const { check, runCommand } = ui;

async function editorText() {
  const lines = page.locator('.editor-group-container.active .monaco-editor .view-lines').first();
  return clean(await lines.innerText());
}

async function waitForEditor(pred, what) {
  const deadline = Date.now() + STEP_MS;
  let text = '';
  while (Date.now() < deadline) {
    text = await editorText().catch(() => '');
    if (pred(text)) return text;
    await page.waitForTimeout(200);
  }
  throw new Error(`timed out waiting for ${what}; editor shows: ${text.slice(0, 1200)}`);
}

/** How many times the find widget finds `needle` in the active editor (0 for "No results"). */
async function countInEditor(needle) {
  await page.locator('.editor-group-container.active .monaco-editor .view-lines').first().click();
  await page.keyboard.press('Control+f');
  const find = page.locator('.editor-group-container.active .find-widget textarea, .editor-group-container.active .find-widget input').first();
  await find.waitFor({ state: 'visible' });
  await find.fill(needle);
  const count = page.locator('.editor-group-container.active .find-widget .matchesCount');
  const deadline = Date.now() + STEP_MS;
  let text = '';
  while (Date.now() < deadline) {
    text = clean(await count.innerText().catch(() => ''));
    if (/No results/i.test(text)) { await page.keyboard.press('Escape'); return 0; }
    const m = /of (\d+)/.exec(text);
    if (m) { await page.keyboard.press('Escape'); return Number(m[1]); }
    await page.waitForTimeout(150);
  }
  throw new Error(`the find widget did not count "${needle}" (shows "${text}")`);
}

/** Fabric: Reload Configuration, then the server's effective configuration document. */
async function effectiveConfiguration(trusted) {
  await runCommand('View: Close All Editors');
  await runCommand('Fabric: Reload Configuration');
  // The document keeps its URI: wait for this answer, not the last one.
  return waitForEditor((t) => t.includes(`Workspace trusted: ${trusted}`) && t.includes(`"trusted": ${trusted}`) && t.includes('"indexDir"'),
    `the configuration document (trusted: ${trusted})`);
}

let server;
let context;
const consoleErrors = [];
try {
  server = await startCodeServer({
    codeServer: opts['code-server'],
    node: process.execPath,
    root: path.join(tmp.root, 'cs'),
    vsix: path.resolve(opts.vsix),
    log,
    // Trust on: a folder never trusted before opens in Restricted Mode.
    workspaceTrust: true,
    // The user's own settings.
    settings: {
      'fabric.server.command': real,
      'fabric.agentDir': tmp.agentDir,
      'fabric.recall.scope': 'global',
    },
  });
  context = await chromium.launchPersistentContext(path.join(tmp.root, 'chromium'), {
    executablePath: opts.chromium,
    headless: true,
    viewport: { width: 1360, height: 820 },
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync',
      '--disable-dev-shm-usage'],
  });
  page = context.pages()[0] ?? await context.newPage();
  ui.page = page;
  page.setDefaultTimeout(STEP_MS);
  page.on('console', (msg) => { if (msg.type() === 'error') consoleErrors.push(msg.text()); });
  page.on('pageerror', (err) => consoleErrors.push(String(err)));

  const userIndex = path.join(tmp.agentDir, 'fabric-lsp', 'memory-index');
  const ready = await check('untrusted: the repository opens in Restricted Mode and the server starts', async () => {
    await page.goto(`${server.url}/?folder=${encodeURIComponent(repo)}`, { timeout: 60_000 });
    await page.locator('.monaco-workbench').waitFor({ timeout: 60_000 });
    await page.locator('.statusbar-item', { hasText: 'Restricted Mode' }).first().waitFor({ state: 'visible', timeout: 60_000 });
    await page.locator('.statusbar-item', { hasText: 'Fabric: ready' }).first().waitFor({ timeout: 60_000 });
  });
  if (!ready) throw new Error('the extension never reported ready; later checks would only time out');

  await check('untrusted: the server received none of the workspace\'s directories', async () => {
    const text = await effectiveConfiguration(false);
    assert(text.includes(`"agentDir": "${tmp.agentDir}"`), `agentDir is the user's: ${text.slice(0, 1200)}`);
    assert(text.includes(`"sessionDir": "${path.join(tmp.agentDir, 'sessions')}"`), `sessionDir is the default: ${text.slice(0, 1200)}`);
    assert(text.includes(`"indexDir": "${userIndex}"`), `indexDir is the default: ${text.slice(0, 1200)}`);
    // (Markdown wraps the long line: compare with whitespace collapsed.)
    assert(text.replace(/\s+/g, ' ').includes('Restricted Mode: only your user settings count for fabric.agentDir, fabric.indexDir, fabric.server.command, fabric.server.env, fabric.server.python, fabric.sessionDir, fabric.team.autoPush, fabric.team.member, fabric.team.projects, fabric.team.url.'),
      `the document says which settings only the user sets: ${text.slice(0, 800)}`);
    await page.screenshot({ path: path.join(shotDir, 'vscode-trust-restricted.png') });
    // Nowhere in the server's answer (sources, warnings, dirs): neither the repository
    // nor the directory it named. The find widget searches the whole document.
    const victimHits = await countInEditor(victim);
    assert(victimHits === 0, `the workspace's indexDir appears ${victimHits} times in the server's configuration`);
    const repoHits = await countInEditor(repo);
    assert(repoHits === 0, `the repository's paths appear ${repoHits} times in the server's configuration`);
    // A setting that is not restricted still comes from the workspace.
    assert(await countInEditor('"commitQuietMs": 4321') === 1, 'the workspace\'s commitQuietMs reached the server');
  });

  await check('untrusted: the workspace\'s server command never ran and its directories are untouched', async () => {
    // A recall makes the server open (and clean up) its index directory.
    await runCommand('View: Close All Editors');
    await runCommand('Fabric: Recall…');
    await page.locator('.quick-input-widget input').pressSequentially('rounding rules', { delay: 30 });
    await page.locator('.quick-input-widget .quick-input-list .monaco-list-row', { hasText: /rounding rules/i }).first().waitFor({ state: 'visible' });
    await page.keyboard.press('Escape');
    assert(fs.existsSync(userIndex), `the index went to the user's default ${userIndex}`);
    assert(!fs.existsSync(ranMarker), `the workspace's server command ran: ${fs.existsSync(ranMarker) ? fs.readFileSync(ranMarker, 'utf8') : ''}`);
    assert(snapshot(victim) === victimBefore, 'the directory named by the workspace\'s indexDir changed');
    assert(snapshot(repo) === repoBefore, 'the repository changed');
    assert(!fs.existsSync(evilSessions), 'the workspace\'s sessionDir was created');
  });

  await check('trusting the workspace (Workspace Trust editor) restarts the server with its settings', async () => {
    await runCommand('Workspaces: Manage Workspace Trust');
    const trust = page.locator('.workspace-trust-editor .workspace-trust-buttons-row .monaco-button', { hasText: /^Trust/ }).first();
    await trust.waitFor({ state: 'visible' });
    await page.screenshot({ path: path.join(shotDir, 'vscode-trust-editor.png') });
    await trust.click();
    await page.locator('.statusbar-item', { hasText: 'Restricted Mode' }).first().waitFor({ state: 'hidden' });
    // The restart runs the workspace's own server command, in the extension's storage dir.
    const deadline = Date.now() + STEP_MS;
    // The command's shell creates the marker, then writes its cwd: wait for the line.
    const written = () => fs.existsSync(ranMarker) && fs.readFileSync(ranMarker, 'utf8').endsWith('\n');
    while (!written() && Date.now() < deadline) await page.waitForTimeout(200);
    assert(written(), 'the workspace\'s server command did not run after trust was granted');
    const cwd = fs.readFileSync(ranMarker, 'utf8').trim();
    assert(!cwd.startsWith(repo) && cwd.startsWith(server.userData), `the server runs in the extension's storage, not the project: ${cwd}`);
    await page.locator('.statusbar-item', { hasText: 'Fabric: ready' }).first().waitFor({ state: 'visible' });
  });

  await check('trusted: the same workspace values reach the server', async () => {
    const text = await effectiveConfiguration(true);
    assert(!text.includes('Restricted Mode:'), `no Restricted Mode line: ${text.slice(0, 400)}`);
    assert(text.includes(`"agentDir": "${evilAgent}"`), `agentDir is the workspace's: ${text.slice(0, 1200)}`);
    assert(text.includes(`"sessionDir": "${evilSessions}"`), `sessionDir is the workspace's: ${text.slice(0, 1200)}`);
    // The repository's agentDir is its global layer now (fabric.json: maxSessions 3).
    assert(text.includes('"maxSessions": 3'), `the workspace agentDir's fabric.json applies: ${text.slice(0, 1200)}`);
    // indexDir: the workspace's path, which the server either uses or refuses with a
    // warning naming it (it is not a directory the server created).
    assert(await countInEditor(victim) >= 1, 'the workspace\'s indexDir reached the server');
    await page.screenshot({ path: path.join(shotDir, 'vscode-trust-trusted.png') });
  });
} catch (err) {
  ui.failed += 1;
  console.log('not ok - harness');
  console.log(String(err?.stack ?? err).split('\n').map((l) => `#   ${l}`).join('\n'));
} finally {
  if (consoleErrors.length > 0) {
    const relevant = consoleErrors.filter((e) => /fabric|extension host|activat/i.test(e));
    for (const e of relevant.slice(0, 20)) console.log(`# console: ${e.slice(0, 400)}`);
  }
  await context?.close().catch(() => undefined);
  await server?.stop().catch(() => undefined);
  const csLog = path.join(tmp.root, 'cs', 'code-server.log');
  if (ui.failed > 0 && fs.existsSync(csLog)) {
    console.log(fs.readFileSync(csLog, 'utf8').split('\n').slice(-30).map((l) => `# code-server: ${l}`).join('\n'));
  }
  log(`done; screenshots in ${shotDir}`);
  if (!opts.keep && ui.failed === 0) tmp.cleanup();
  else console.log(`# kept ${tmp.root}`);
  console.log(`${ui.passed} passed, ${ui.failed} failed`);
  process.exit(ui.failed === 0 ? 0 : 1);
}
