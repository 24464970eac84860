// End-to-end test in real VS Code: code-server + headless Debian chromium driven by
// playwright-core. Installs the packaged .vsix into a fresh profile, opens a workspace
// over copies of the real-Pi session fixtures, runs the Fabric palette commands and
// reads what they show from the page.
//
//   node test/e2e/run.mjs --vsix dist/fabric-lsp.vsix --code-server PATH [--screenshots DIR]
//
// Prints `ok - name` / `not ok - name` per check and `N passed, N failed`; exit 0/1.
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { parseArgs } from 'node:util';
import { chromium } from 'playwright-core';
import { header, makeAgentDir, serverCommand } from '../fixtures.mjs';
import { startCodeServer } from './codeServer.mjs';
import { assert, clean, harness } from './harness.mjs';

const { values: opts } = parseArgs({
  options: {
    vsix: { type: 'string' },
    'code-server': { type: 'string' },
    chromium: { type: 'string', default: '/usr/bin/chromium' },
    screenshots: { type: 'string' },
    keep: { type: 'boolean', default: false },
    // Open the workspace untrusted (Restricted Mode) and check only what trust changes.
    untrusted: { type: 'boolean', default: false },
  },
});
if (!opts.vsix || !opts['code-server']) {
  console.error('usage: run.mjs --vsix FILE --code-server PATH [--screenshots DIR]');
  process.exit(2);
}

const STEP_MS = 30_000;
const started = Date.now();
const log = (msg) => console.log(`# [${((Date.now() - started) / 1000).toFixed(1)}s] ${msg}`);
class Done extends Error {}

const tmp = makeAgentDir('fabric-e2e-');
const failDir = path.join(tmp.root, 'failures');
const shotDir = opts.screenshots ? path.resolve(opts.screenshots) : path.join(tmp.root, 'shots');
fs.mkdirSync(failDir, { recursive: true });
fs.mkdirSync(shotDir, { recursive: true });

let page;
const ui = harness({ shotDir, failDir, stepMs: STEP_MS });
const { check, runCommand, shot } = ui;

/** The modal dialog VS Code shows for `showWarningMessage(…, {modal: true})`: its text, then a click on `button`.
 *  A dialog without that button (another question, e.g. "Request Anyway" after a failed preview) fails the
 *  step with the dialog's text, so a failure says which dialog came instead. */
async function answerDialog(button) {
  const box = page.locator('.monaco-dialog-box').first();
  await box.waitFor({ state: 'visible' });
  const text = clean(await box.innerText());
  try {
    await box.locator('.monaco-button', { hasText: button }).first().click({ timeout: STEP_MS });
  } catch (err) {
    const shown = await box.innerText().then(clean, () => text);
    throw new Error(`the dialog has no "${button}" button; it says: ${shown}\n${err.message.split('\n')[0]}`);
  }
  await box.waitFor({ state: 'hidden' });
  return text;
}

async function quickPickRows() {
  const rows = page.locator('.quick-input-widget .quick-input-list .monaco-list-row');
  return (await rows.allInnerTexts()).map(clean);
}

async function waitForRows(pred, what) {
  const deadline = Date.now() + STEP_MS;
  let rows = [];
  while (Date.now() < deadline) {
    rows = await quickPickRows();
    if (pred(rows)) return rows;
    await page.waitForTimeout(200);
  }
  throw new Error(`timed out waiting for ${what}; rows: ${JSON.stringify(rows).slice(0, 800)}`);
}

/**
 * Clicks the quick pick row that includes `text` once the list has settled: the same rows
 * in two reads 200 ms apart, none left over from the command palette. (The quick input
 * widget reuses its rows: right after a command opens a picker, a row can still show the
 * palette's label beside the new item's description, and an index taken then can point
 * at another row by the time it is clicked.) Returns the settled rows.
 */
async function pickRow(text, what) {
  let last = '';
  const rows = await waitForRows((r) => {
    const now = JSON.stringify(r);
    const settled = now === last && r.some((t) => t.includes(text)) && !r.some((t) => t.includes('recently used'));
    last = now;
    return settled;
  }, what);
  await page.locator('.quick-input-widget .quick-input-list .monaco-list-row', { hasText: text }).first().click();
  return rows;
}

/** Text of the visible lines of the active editor. */
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
  throw new Error(`timed out waiting for ${what}; editor shows: ${text.slice(0, 800)}`);
}

/** Scroll the active editor to `needle` with the find widget, then return the visible text. */
async function findInEditor(needle, pred, what) {
  await page.locator('.editor-group-container.active .monaco-editor .view-lines').first().click();
  await page.keyboard.press('Control+f');
  const find = page.locator('.editor-group-container.active .find-widget textarea, .editor-group-container.active .find-widget input').first();
  await find.waitFor({ state: 'visible' });
  await find.fill(needle);
  await page.keyboard.press('Enter');
  const text = await waitForEditor(pred, what);
  await page.keyboard.press('Escape');
  return text;
}

/** A webview frame (the plan view or panel) whose text satisfies `pred`. */
async function waitForWebview(pred, what) {
  const deadline = Date.now() + STEP_MS;
  let seen = [];
  while (Date.now() < deadline) {
    seen = [];
    for (const frame of page.frames()) {
      const text = await frame.evaluate(() => document.body?.innerText ?? '').catch(() => '');
      if (text) seen.push(text.slice(0, 200));
      if (pred(clean(text))) return { frame, text: clean(text) };
    }
    await page.waitForTimeout(250);
  }
  throw new Error(`timed out waiting for ${what}; webviews show: ${JSON.stringify(seen).slice(0, 800)}`);
}

async function activeTabTitle() {
  return clean(await page.locator('.editor-group-container.active .tab.active').first().innerText());
}

async function closeAllEditors() {
  await runCommand('View: Close All Editors');
  await page.waitForTimeout(300);
}

let server;
let context;
const consoleErrors = [];
try {
  const [serverCmd] = [serverCommand()];
  server = await startCodeServer({
    codeServer: opts['code-server'],
    node: process.execPath,
    root: path.join(tmp.root, 'cs'),
    vsix: path.resolve(opts.vsix),
    log,
    workspaceTrust: opts.untrusted,
    settings: {
      'fabric.server.command': serverCmd,
      'fabric.agentDir': tmp.agentDir,
      'fabric.recall.scope': 'global',
      'fabric.recall.debounceMs': 150,
      // Long enough to see the pending intent in the status bar before it commits.
      'fabric.compaction.commitQuietMs': 6000,
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

  // Untrusted: a folder of its own (the server refuses to read an agent dir that lies inside
  // an untrusted workspace, and says so in its warnings).
  const workspace = opts.untrusted ? path.join(tmp.root, 'project') : tmp.agentDir;
  fs.mkdirSync(workspace, { recursive: true });
  const file02 = tmp.files['02'];
  const id02 = header(file02).id;

  const ready = await check('workbench loads and the extension reports ready', async () => {
    await page.goto(`${server.url}/?folder=${encodeURIComponent(workspace)}`, { timeout: 60_000 });
    await page.locator('.monaco-workbench').waitFor({ timeout: 60_000 });
    await page.locator('.statusbar').waitFor({ timeout: STEP_MS });
    await page.locator('.statusbar-item', { hasText: 'Fabric: ready' }).first().waitFor({ timeout: 60_000 });
    log('Fabric: ready');
  });
  if (!ready) throw new Error('the extension never reported ready; later checks would only time out');

  await check('a small history shows that it was indexed: the status item says "N sessions indexed"', async () => {
    // The background indexer's passes end with `complete: true` (fabric/activity): on six
    // sessions it is over in well under a second, too fast for a progress notification.
    const n = Object.keys(tmp.files).length;
    const item = page.locator('.statusbar-item', { hasText: `Fabric: ready · ${n} sessions indexed` }).first();
    await item.waitFor({ timeout: 60_000 });
    log(`status item: ${await item.innerText()}`);
  });

  const configurationCheck = async (trusted) => {
    await runCommand('Fabric: Reload Configuration');
    const text = await waitForEditor((t) => t.includes('effective server configuration'), 'the configuration document');
    assert(text.includes(`Workspace trusted: ${trusted}`), `VS Code trust: ${text.slice(0, 400)}`);
    assert(text.includes(`"trusted": ${trusted}`), `server trust: ${text.slice(0, 800)}`);
    assert(text.includes(`"agentDir": "${tmp.agentDir}"`), `agentDir from the settings: ${text.slice(0, 800)}`);
    await findInEditor('commitQuietMs', (t) => t.includes('"commitQuietMs": 6000'), 'the explicit compaction setting');
    // No warnings: the extension sends only keys the server knows.
    await findInEditor('"warnings"', (t) => /"warnings": \[\]/.test(t), 'an empty warnings list');
  };

  if (opts.untrusted) {
    await check('untrusted workspace: Restricted Mode, server runs with trusted: false', async () => {
      await page.locator('.statusbar-item', { hasText: 'Restricted Mode' }).first().waitFor({ state: 'visible' });
      await configurationCheck(false);
      await shot('untrusted');
    });
    await check('untrusted workspace: Expand still works', async () => {
      await runCommand('Fabric: Expand Entry…');
      await page.locator('.quick-input-widget input').fill(`pi-entry:${id02}/662cb756`);
      await page.keyboard.press('Enter');
      await waitForEditor((t) => t.includes('Add a CHANGELOG entry'), 'the expanded entry');
    });
    throw new Done();
  }

  await check('Reload Configuration: trusted workspace, settings reach the server', () => configurationCheck(true));

  await check('Recall… searches live and opens the expanded entry', async () => {
    await closeAllEditors();
    await runCommand('Fabric: Recall…');
    await page.locator('.quick-input-widget .quick-input-title', { hasText: 'Fabric: Recall' }).waitFor({ state: 'visible' });
    const input = page.locator('.quick-input-widget input');
    // Type like a person: each keystroke restarts the debounce and cancels the last search.
    await input.pressSequentially('rounding rules', { delay: 40 });
    const rows = await waitForRows((r) => r.some((t) => /user/.test(t) && /rounding rules/i.test(t)), 'a recall result');
    assert(rows.some((t) => /session [0-9a-f]{8}/.test(t)), `rows show the session: ${rows.join(' | ')}`);
    assert(rows.some((t) => /\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}/.test(t)), `rows show the time: ${rows.join(' | ')}`);
    // 03 and 04 hold one session id (04 is a copy resumed by hand): each row names its file
    assert(rows.some((t) => /session 01a22a5b[-0-9a-f]* · line \d+ · 03-rpc/.test(t)) && rows.some((t) => /session 01a22a5b[-0-9a-f]* · line \d+ · 04-resumed/.test(t)),
      `rows tell the two files of one session apart: ${rows.join(' | ')}`);
    await shot('recall');
    const index = rows.findIndex((t) => /user/.test(t) && /rounding rules/i.test(t));
    await page.locator('.quick-input-widget .quick-input-list .monaco-list-row').nth(index).click();
    const text = await waitForEditor((t) => t.includes('Please document the rounding rules'), 'the expanded entry');
    assert(/pi-entry:[0-9a-f-]+\/10df8419/.test(text), `expanded entry shows its reference: ${text.slice(0, 400)}`);
    assert((await activeTabTitle()).includes('Entry 10df8419'), `tab title: ${await activeTabTitle()}`);
    await shot('recall-expanded');
  });

  await check('Recall… item button opens the session JSONL at the entry line', async () => {
    await runCommand('Fabric: Recall…');
    await page.locator('.quick-input-widget .quick-input-title', { hasText: 'Fabric: Recall' }).waitFor({ state: 'visible' });
    await page.locator('.quick-input-widget input').pressSequentially('provider error', { delay: 30 });
    const rows = await waitForRows((r) => r.some((t) => /user/.test(t) && /provider error/.test(t)), 'a recall result');
    const index = rows.findIndex((t) => /user/.test(t) && /provider error/.test(t));
    const line = Number(/line (\d+)/.exec(rows[index])[1]);
    const row = page.locator('.quick-input-widget .quick-input-list .monaco-list-row').nth(index);
    await row.hover();
    await row.locator('.action-label.codicon-go-to-file').click();
    await page.locator('.editor-group-container.active .tab.active', { hasText: '.jsonl' }).waitFor({ state: 'visible' });
    await page.locator('.statusbar-item', { hasText: `Ln ${line},` }).first().waitFor({ state: 'visible' });
    await waitForEditor((t) => t.includes('Now trigger a provider error please'), 'the entry line in the JSONL');
    // Expand Entry… offers the entry of the cursor's JSONL line.
    await runCommand('Fabric: Expand Entry…');
    const input = page.locator('.quick-input-widget input');
    await page.locator('.quick-input-widget', { hasText: 'pi-entry:<session>/<entryId>' }).waitFor({ state: 'visible' });
    const offered = await input.inputValue();
    const entryId = JSON.parse(fs.readFileSync(tmp.files['02'], 'utf8').split('\n')[line - 1]).id;
    assert(offered === `pi-entry:${id02}/${entryId}`, `prefilled with ${offered}`);
    await page.keyboard.press('Enter');
    await waitForEditor((t) => t.includes(`reference: pi-entry:${id02}/${entryId}`), 'the expanded entry of that line');
  });

  await check('errors say what is wrong and what to do, without internal codes', async () => {
    await closeAllEditors();
    await runCommand('Fabric: Recall…');
    await page.locator('.quick-input-widget .quick-input-title', { hasText: 'Fabric: Recall' }).waitFor({ state: 'visible' });
    await page.locator('.quick-input-widget .quick-input-titlebar .codicon-regex').first().click();
    await page.locator('.quick-input-widget .quick-input-title', { hasText: 'regex' }).waitFor({ state: 'visible' });
    const input = page.locator('.quick-input-widget input');
    assert(/a regular expression/.test(await input.getAttribute('placeholder')), 'the placeholder says regex');
    await input.pressSequentially('foo(', { delay: 30 });
    const rows = await waitForRows((r) => r.some((t) => t.includes('is not valid')), 'the regex error');
    const said = rows.join(' | ');
    assert(said.includes('The regular expression “foo(” is not valid: Unterminated group.'), `names the pattern and the reason: ${said}`);
    assert(!said.includes('invalid_regex') && !said.includes('not authoritative'), `no internal codes: ${said}`);
    await shot('recall-regex-error');
    // Its action switches to literal words and searches again.
    await page.locator('.quick-input-widget .quick-input-list .monaco-list-row', { hasText: 'Search Literal Words' }).first().click();
    await page.locator('.quick-input-widget .quick-input-title', { hasText: 'regex' }).waitFor({ state: 'hidden' });
    await waitForRows((r) => r.length > 0 && !r.some((t) => t.includes('is not valid')), 'a literal search');
    await page.keyboard.press('Escape');
    await runCommand('Notifications: Clear All Notifications');
    await runCommand('Fabric: Expand Entry…');
    await page.locator('.quick-input-widget', { hasText: 'pi-entry:<session>/<entryId>' }).waitFor({ state: 'visible' });
    await input.fill('nonsense/abc');
    await page.keyboard.press('Enter');
    const toast = page.locator('.notification-toast', { hasText: 'No Pi session matches “nonsense”' }).first();
    await toast.waitFor({ state: 'visible' });
    const text = clean(await toast.innerText());
    assert(!text.includes('session_not_found') && text.includes('Choose a Session…'), `message and action: ${text}`);
    // An error toast with a button stays until dismissed: later clicks must not land on it.
    await runCommand('Notifications: Clear All Notifications');
    await toast.waitFor({ state: 'hidden' });
  });

  await check('Expand Entry… opens an entry by reference', async () => {
    await closeAllEditors();
    await runCommand('Fabric: Expand Entry…');
    const input = page.locator('.quick-input-widget input');
    await input.waitFor({ state: 'visible' });
    await input.fill(`pi-entry:${id02}/662cb756`);
    await page.keyboard.press('Enter');
    const text = await waitForEditor((t) => t.includes('Add a CHANGELOG entry'), 'the expanded entry');
    assert(text.includes(`pi-entry:${id02}/662cb756`), `reference shown: ${text.slice(0, 400)}`);
    assert(text.includes('line 17'), `line shown: ${text.slice(0, 400)}`);
    await shot('expand');
    // The line it shows can be typed back: `<session>#17` is that entry (issue 34, finding 6).
    await closeAllEditors();
    await runCommand('Fabric: Expand Entry…');
    await input.waitFor({ state: 'visible' });
    await input.fill(`${id02}#17`);
    await page.keyboard.press('Enter');
    const again = await waitForEditor((t) => t.includes('Add a CHANGELOG entry'), 'the entry on line 17');
    assert(again.includes(`pi-entry:${id02}/662cb756`) && again.includes('line 17'), `#17 is line 17: ${again.slice(0, 400)}`);
  });

  await check('hover previews an entry reference (served by the server)', async () => {
    const line = page.locator('.editor-group-container.active .view-lines .view-line', { hasText: 'pi-entry:' }).first();
    await line.waitFor({ state: 'visible' });
    // Screen position of the text "pi-entry:" itself (tokens may split it across spans).
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
        await hover.first().waitFor({ state: 'visible', timeout: 5000 });
        break;
      } catch {
        await page.mouse.move(10, 10);
        await page.waitForTimeout(300);
      }
    }
    const text = clean(await hover.first().innerText());
    assert(/CHANGELOG/.test(text) && text.includes('662cb756'), `hover text: ${text.slice(0, 400)}`);
    await shot('hover');
    // The hover's link opens the entry (issue 34, finding 8: not just "expand the entry").
    const link = hover.first().locator('a', { hasText: 'Open the entry' }).first();
    const href = (await link.getAttribute('data-href')) ?? (await link.getAttribute('href')) ?? '';
    assert(href.startsWith('command:fabricLsp.expandEntry?') && decodeURIComponent(href).includes('662cb756'), `the link opens this entry: ${href}`);
    await link.click();
    await waitForEditor((t) => t.includes('Add a CHANGELOG entry') && t.includes('reference: pi-entry:'), 'the entry opened from the hover');
    await page.mouse.move(10, 10);
  });

  await check('Sessions… lists the fixture sessions', async () => {
    await closeAllEditors();
    await runCommand('Fabric: Sessions…');
    const rows = await waitForRows((r) => r.length >= 6 && r.some((t) => t.includes(id02)) && r.every((t) => /entries/.test(t)), 'six sessions');
    assert(rows.every((t) => /entries/.test(t)), `rows: ${rows.join(' | ')}`);
    await shot('sessions');
    // Choosing a session offers what to do with it; Compaction Status answers in a document
    // that stays open (not a toast that vanishes).
    const id01 = header(tmp.files['01']).id;
    await pickRow(id01, 'the session picker');
    const actions = await waitForRows((r) => r.some((t) => t.includes('Compaction Status')), 'the session actions');
    for (const a of ['Open JSONL', 'Preview Compaction', 'Recall in this session…', 'Request Compaction…']) {
      assert(actions.some((t) => t.includes(a)), `action ${a}: ${actions.join(' | ')}`);
    }
    await page.locator('.quick-input-widget .quick-input-list .monaco-list-row', { hasText: 'Compaction Status' }).first().click();
    const status = await waitForEditor((t) => t.includes('# Compaction status —') && t.includes('nothing pending'), 'the status document');
    assert(/the session is (settled|busy)/.test(status) && status.includes(tmp.files['01'].split('/').pop()), `status: ${status.slice(0, 600)}`);
    assert(/Compaction status — /.test(await activeTabTitle()), `the tab: ${await activeTabTitle()}`);
  });

  await check('Preview Compaction renders summary, cut point, budget and QA', async () => {
    await closeAllEditors();
    await runCommand('Fabric: Preview Compaction');
    // No session file is active, so the command asks for one.
    await pickRow(id02, 'the session picker');
    // The plan opens in the Fabric sidebar's Compaction Plan view (a webview).
    const { frame, text } = await waitForWebview((t) => t.includes('Compaction plan') && t.includes(id02.slice(0, 8)), 'the compaction plan');
    assert(/Compacting now would replace \d+ entries/.test(text), `outcome sentence: ${text.slice(0, 600)}`);
    for (const section of ['Cut map', 'Summarized by this compaction', 'Kept verbatim', 'Budget', 'In context now',
      'Projected after compaction', 'QA', 'Summary, exactly as committed']) {
      assert(text.includes(section), `plan shows "${section}": ${text.slice(0, 1500)}`);
    }
    await shot('preview');
    await frame.evaluate(() => document.querySelector('details.summary')?.scrollIntoView());
    const summary = await frame.evaluate(() => document.querySelector('details.summary pre')?.textContent ?? '');
    assert(summary.startsWith('['), `the summary verbatim: ${summary.slice(0, 200)}`);
    await shot('preview-summary');
  });

  await check('Preview Compaction with Instructions… asks for instructions and preserve items', async () => {
    await closeAllEditors();
    await runCommand('Fabric: Preview Compaction with Instructions…');
    await pickRow(id02, 'the session picker');
    const input = page.locator('.quick-input-widget input');
    await page.locator('.quick-input-widget', { hasText: 'Instructions for the summary' }).waitFor({ state: 'visible' });
    await input.fill('Focus on the CHANGELOG work');
    await page.keyboard.press('Enter');
    await page.locator('.quick-input-widget', { hasText: 'Preserve item 1' }).waitFor({ state: 'visible' });
    await input.fill('release date: 2026-12-01');
    await page.keyboard.press('Enter');
    await page.locator('.quick-input-widget', { hasText: 'Preserve item 2' }).waitFor({ state: 'visible' });
    await page.keyboard.press('Enter');
    const { text } = await waitForWebview((t) => t.includes('Compaction plan') && t.includes('Instructions: Focus on the CHANGELOG work'),
      'the plan with instructions');
    assert(text.includes('Preserve: 1 item'), `preserve count shown: ${text.slice(0, 600)}`);
    // The typed request reaches the summary itself.
    assert(/release date: 2026-12-01 \[preserve:/.test(text), `the preserved item in the summary: ${text.slice(-1500)}`);
    await shot('preview-instructions');
  });

  await check('Request Compaction… asks first (title, entries, tokens); Cancel sends nothing', async () => {
    await closeAllEditors();
    const file = tmp.files['02'];
    const id = header(file).id;
    const before = fs.readFileSync(file);
    await runCommand('Fabric: Request Compaction…');
    const picked = await pickRow(id, 'the session picker');
    const row = picked.find((t) => t.includes(id)).trim();
    // Sessions are named by their first user goal, not by id or file name.
    assert(/^Please fix the failing tests in the calc project/.test(row), `picker row titled by its goal: ${row}`);
    await page.locator('.quick-input-widget', { hasText: 'Instructions for the summary' }).waitFor({ state: 'visible' });
    await page.keyboard.press('Enter');
    await page.locator('.quick-input-widget', { hasText: 'Preserve item 1' }).waitFor({ state: 'visible' });
    await page.keyboard.press('Enter');
    await page.locator('.monaco-dialog-box').first().waitFor({ state: 'visible' });
    await shot('compact-confirm');
    const text = await answerDialog('Cancel');
    assert(text.includes('Compact “Please fix the failing tests in the calc project”?'), `the question names the session: ${text}`);
    assert(/Replaces [\d,]+ entries \(lines \d+–\d+\) with a summary/.test(text), `entries replaced: ${text}`);
    assert(/[\d,]+ tokens saved/.test(text) && text.includes('cannot be undone'), `tokens saved, permanent: ${text}`);
    // Nothing was sent: the server has no intent for the session, and the file is as it was.
    await runCommand('Notifications: Clear All Notifications');
    await runCommand('Fabric: Compaction Status');
    await pickRow(id, 'the session picker');
    const said = await waitForEditor((t) => t.includes('# Compaction status — Please fix the failing tests'), 'the status document');
    assert(said.includes('nothing pending'), `no pending intent after Cancel: ${said.slice(0, 600)}`);
    assert(Buffer.compare(before, fs.readFileSync(file)) === 0, 'the session file is byte-identical');
    await page.keyboard.press('Escape');
  });

  await check('Cancel Compaction withdraws a pending intent', async () => {
    await closeAllEditors();
    // 02: 05 has nothing to compact at 4000 kept tokens, and such a request is refused
    const file05 = tmp.files['02'];
    const id05 = header(file05).id;
    const before = fs.readFileSync(file05);
    const now = new Date();
    fs.utimesSync(file05, now, now);
    await runCommand('Fabric: Request Compaction…');
    await pickRow(id05, 'the session picker');
    await page.locator('.quick-input-widget', { hasText: 'Instructions for the summary' }).waitFor({ state: 'visible' });
    await page.keyboard.press('Enter');
    await page.locator('.quick-input-widget', { hasText: 'Preserve item 1' }).waitFor({ state: 'visible' });
    await page.keyboard.press('Enter');
    await answerDialog('Compact');
    const pending = page.locator('.statusbar-item', { hasText: 'Fabric: compaction pending' }).first();
    await pending.waitFor({ state: 'visible' });
    // A fresh mtime restarts the server's quiet interval, so the commit cannot win the
    // race against the cancel even on a slow machine.
    const again = new Date();
    fs.utimesSync(file05, again, again);
    // With one tracked intent and no session editor, Cancel takes that session.
    await runCommand('Fabric: Cancel Compaction');
    await page.locator('.notification-toast', { hasText: /pending compaction of .* cancelled/ }).first().waitFor({ state: 'visible' });
    await pending.waitFor({ state: 'hidden' });
    await page.waitForTimeout(7000); // past the quiet interval: nothing may be committed
    assert(Buffer.compare(before, fs.readFileSync(file05)) === 0, 'the session file is unchanged');
  });

  await check('Request Compaction… shows the pending intent, then the commit notification', async () => {
    await closeAllEditors();
    await runCommand('Notifications: Clear All Notifications');
    const file01 = tmp.files['02'];
    const id01 = header(file01).id;
    const linesBefore = fs.readFileSync(file01, 'utf8').split('\n').filter(Boolean).length;
    // A fresh write: the server waits for the file to be quiet before committing.
    const now = new Date();
    fs.utimesSync(file01, now, now);
    await runCommand('Fabric: Request Compaction…');
    await pickRow(id01, 'the session picker');
    const input = page.locator('.quick-input-widget input');
    await page.locator('.quick-input-widget', { hasText: 'Instructions for the summary' }).waitFor({ state: 'visible' });
    await input.fill('Keep the calc API stable');
    await page.keyboard.press('Enter');
    await page.locator('.quick-input-widget', { hasText: 'Preserve item 1' }).waitFor({ state: 'visible' });
    await input.fill('divide(a, 0) raises ZeroDivisionError');
    await page.keyboard.press('Enter');
    await page.locator('.quick-input-widget', { hasText: 'Preserve item 2' }).waitFor({ state: 'visible' });
    await page.keyboard.press('Enter');
    await page.locator('.monaco-dialog-box').first().waitFor({ state: 'visible' });
    // Restart the quiet interval just before the request goes out, so the pending state
    // lasts long enough to be seen even on a slow machine.
    const again = new Date();
    fs.utimesSync(file01, again, again);
    const asked = await answerDialog('Compact');
    assert(/Replaces [\d,]+ entries/.test(asked), `the question: ${asked}`);
    await page.locator('.statusbar-item', { hasText: 'Fabric: compaction pending' }).first().waitFor({ state: 'visible' });
    await shot('intent-pending');
    // The request is announced once (the status bar item carries it from now on).
    const requested = page.locator('.notification-toast', { hasText: /compaction of .* requested/ });
    await requested.first().waitFor({ state: 'visible' });
    assert((await requested.count()) === 1, `one "requested" message, not ${await requested.count()}`);
    const toast = page.locator('.notification-toast', { hasText: /compaction of .* committed/ }).first();
    await toast.waitFor({ state: 'visible', timeout: 45_000 });
    await shot('intent-committed');
    const lines = fs.readFileSync(file01, 'utf8').split('\n').filter(Boolean);
    assert(lines.length === linesBefore + 1, `one entry appended (${linesBefore} → ${lines.length})`);
    assert(JSON.parse(lines[lines.length - 1]).type === 'compaction', 'the appended entry is a compaction');
    await page.locator('.statusbar-item', { hasText: 'Fabric: compaction pending' }).first().waitFor({ state: 'hidden' });
  });

  await check('Show Log and Restart Server', async () => {
    await runCommand('Fabric: Show Log');
    await page.locator('.part.panel', { hasText: 'Output' }).first().waitFor({ state: 'visible' });
    const deadline = Date.now() + STEP_MS;
    let channel = '';
    while (Date.now() < deadline && channel !== 'Fabric') {
      channel = await page.evaluate(() => {
        const select = document.querySelector('.part.panel select.monaco-select-box');
        return select && select.selectedIndex >= 0 ? select.options[select.selectedIndex].text : '';
      });
      if (channel !== 'Fabric') await page.waitForTimeout(200);
    }
    assert(channel === 'Fabric', `the Output panel shows the "Fabric" channel, not "${channel}"`);
    await runCommand('Fabric: Restart Server');
    // The restarting state may be too short to see; only the ready state after it matters.
    await page.locator('.statusbar-item', { hasText: 'Fabric: restarting' }).first().waitFor({ state: 'visible', timeout: 3000 }).catch(() => undefined);
    await page.locator('.statusbar-item', { hasText: 'Fabric: ready' }).first().waitFor({ state: 'visible' });
    // The new server answers: Expand works again.
    await runCommand('Fabric: Expand Entry…');
    await page.locator('.quick-input-widget input').fill(`pi-entry:${id02}/6a50d7b6`);
    await page.keyboard.press('Enter');
    await waitForEditor((t) => t.includes('Please fix the failing tests'), 'an expand after the restart');
  });
} catch (err) {
  if (!(err instanceof Done)) {
    ui.failed += 1;
    console.log(`not ok - harness`);
    console.log(String(err?.stack ?? err).split('\n').map((l) => `#   ${l}`).join('\n'));
  }
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
