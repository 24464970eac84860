// Team recall in real VS Code (issue 35; docs/team.md): code-server + headless chromium, the
// real fabric-lsp server, a real PostgreSQL cluster that two members pushed to
// (tests/editors/vscode/test_vscode_team.py prepares it and the expected answer).
//
// "Fabric: Recall in the Team…" searches the team database into the Recall Results view:
// sessions are named by the member who pushed them, an entry opens as the stored entry
// with who pushed it from which machine (no JSONL: that file is on the member's machine).
//
//   node test/e2e/team.mjs --vsix FILE --code-server PATH --agent-dir DIR --team-url URL
//        --member NAME --expect FILE [--screenshots DIR]
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { parseArgs } from 'node:util';
import { chromium } from 'playwright-core';
import { serverCommand } from '../fixtures.mjs';
import { startCodeServer } from './codeServer.mjs';
import { assert, clean, harness } from './harness.mjs';

const { values: opts } = parseArgs({
  options: {
    vsix: { type: 'string' },
    'code-server': { type: 'string' },
    chromium: { type: 'string', default: '/usr/bin/chromium' },
    screenshots: { type: 'string' },
    'agent-dir': { type: 'string' },
    'team-url': { type: 'string' },
    member: { type: 'string' },
    expect: { type: 'string' },
    keep: { type: 'boolean', default: false },
  },
});
for (const key of ['vsix', 'code-server', 'agent-dir', 'team-url', 'member', 'expect']) {
  if (!opts[key]) {
    console.error(`usage: team.mjs: --${key} is required`);
    process.exit(2);
  }
}
const expect = JSON.parse(fs.readFileSync(opts.expect, 'utf8'));

const started = Date.now();
const log = (msg) => console.log(`# [${((Date.now() - started) / 1000).toFixed(1)}s] ${msg}`);
const root = fs.mkdtempSync(path.join(os.tmpdir(), 'fabric-team-'));
const workspace = path.join(root, 'ws');
fs.mkdirSync(workspace);
const shotDir = opts.screenshots ? path.resolve(opts.screenshots) : path.join(root, 'shots');
const failDir = path.join(root, 'failures');
fs.mkdirSync(shotDir, { recursive: true });
fs.mkdirSync(failDir, { recursive: true });

const ui = harness({ shotDir, failDir });
const { check, until, shot, runCommand, pane, rows } = ui;
let page;
const short = (id) => (id.length > 13 ? id.slice(0, 8) : id);

let server;
let context;
try {
  server = await startCodeServer({
    codeServer: opts['code-server'],
    node: process.execPath,
    root: path.join(root, 'cs'),
    vsix: path.resolve(opts.vsix),
    log,
    settings: {
      'fabric.server.command': serverCommand(),
      'fabric.agentDir': path.resolve(opts['agent-dir']),
      'fabric.team.url': opts['team-url'],
      'fabric.team.member': opts.member,
      'workbench.sideBar.location': 'left',
    },
  });
  context = await chromium.launchPersistentContext(path.join(root, 'chromium'), {
    executablePath: opts.chromium,
    headless: true,
    viewport: { width: 1440, height: 860 },
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
      '--disable-component-update', '--disable-sync', '--disable-dev-shm-usage'],
  });
  page = context.pages()[0] ?? await context.newPage();
  ui.page = page;
  page.setDefaultTimeout(30_000);

  await check('workbench loads and the extension reports ready', async () => {
    await page.goto(`${server.url}/?folder=${encodeURIComponent(workspace)}`, { timeout: 60_000 });
    await page.locator('.monaco-workbench').waitFor({ timeout: 60_000 });
    await page.locator('.statusbar-item', { hasText: 'Fabric: ready' }).first().waitFor({ timeout: 60_000 });
  });

  const members = [...new Set(expect.items.map((i) => i.member))];
  const firstSession = `${expect.items[0].member} · session ${short(expect.items[0].sessionId)}`;

  /** The row of the first session's first entry (the rows are in tree order). */
  async function firstEntryRow() {
    const all = pane('Recall Results').locator('.monaco-list-row');
    const at = (await rows('Recall Results')).findIndex((t) => t.startsWith(firstSession));
    assert(at >= 0, `no row ${firstSession}`);
    return all.nth(at + 1);
  }

  await check('before any team answer, the scope list offers every member the database knows (fabric/teamMembers)', async () => {
    await runCommand('Fabric: Recall Scope…');
    const list = page.locator('.quick-input-widget .quick-input-list');
    for (const m of expect.members) {
      const row = list.locator('.monaco-list-row', { hasText: `team: ${m.member}` }).first();
      await row.waitFor({ state: 'visible' });
      const text = clean(await row.innerText());
      const want = `${m.sessions} session${m.sessions === 1 ? '' : 's'} · ${m.entries} entr`;
      assert(text.includes(want) && text.includes(m.machines[0]), `${m.member}: "${want}" and its machine in: ${text}`);
    }
    await shot('team-scopes');
    await page.keyboard.press('Escape');
    await page.locator('.quick-input-widget').waitFor({ state: 'hidden' });
  });

  await check('"Recall in the Team…" shows each session under the member who pushed it', async () => {
    await runCommand('Fabric: Recall in the Team…');
    const box = page.locator('.quick-input-widget');
    await box.locator('.quick-input-title', { hasText: 'team' }).waitFor({ state: 'visible' });
    await box.locator('input').fill(expect.query);
    await page.keyboard.press('Enter');
    const list = await until('the team answer in the Results view', async () => {
      const header = clean(await pane('Recall Results').locator('.pane-header').innerText());
      const r = await rows('Recall Results');
      return { ok: header.includes(`“${expect.query}”`) && header.includes('team') && r.some((t) => t.startsWith(firstSession)), value: [header, ...r] };
    });
    // the first session's row names the machine it was pushed from
    assert(list.find((t) => t.startsWith(firstSession)).includes(expect.machine), `the machine on ${firstSession}: ${list.join(' | ')}`);
    await shot('team-recall');
    // every session in view (collapsed): each member's sessions, under the member's name
    await pane('Recall Results').locator('.pane-header').hover();
    await pane('Recall Results').locator('.pane-header .codicon-collapse-all').first().click();
    const sessions = await until('the sessions collapsed', async () => {
      const r = await rows('Recall Results');
      return { ok: r.length > 1 && r.every((t) => / · session /.test(t) || /^Load more/.test(t)), value: r };
    });
    for (const m of members) assert(sessions.some((t) => t.startsWith(`${m} · session `)), `a session of ${m}: ${sessions.join(' | ')}`);
    await pane('Recall Results').locator('.monaco-list-row', { hasText: firstSession }).first().click();
    await until('the first session open again', async () => {
      const r = await rows('Recall Results');
      const at = r.findIndex((t) => t.startsWith(firstSession));
      return { ok: at >= 0 && at + 1 < r.length && !/ · session /.test(r[at + 1]), value: r };
    });
  });

  await check('a team entry has no JSONL button (its file is on the member\'s machine)', async () => {
    const entry = await firstEntryRow();
    await entry.hover();
    await entry.locator('.action-label.codicon-open-preview').first().waitFor({ state: 'visible' });
    assert(await entry.locator('.action-label.codicon-go-to-file').count() === 0, 'no "Open the JSONL Line" on a team entry');
  });

  await check('a team entry opens as the stored entry, with who pushed it from which machine', async () => {
    await (await firstEntryRow()).click();
    const text = await until('the stored entry', async () => {
      const t = clean(await page.locator('.editor-group-container.active .monaco-editor .view-lines').first().innerText().catch(() => ''));
      return { ok: t.includes('pushed by:'), value: t };
    });
    const want = `pushed by: ${expect.first.member} (machine ${expect.machine})`;
    assert(text.includes(want), `${want} in: ${text.slice(0, 600)}`);
    assert(text.includes(`pi-entry:${expect.items[0].sessionId}/${expect.items[0].entryId}`), `the entry's reference in: ${text.slice(0, 600)}`);
    assert(text.includes(clean(expect.first.note).slice(0, 40)), `the server's note in: ${text.slice(0, 800)}`);
    const tab = clean(await page.locator('.editor-group-container.active .tab.active').first().innerText());
    assert(tab.includes(expect.first.member), `the tab names the member: ${tab}`);
    await shot('team-entry');
  });

  await check('the scope list narrows to one member seen in the answer (team:<member>)', async () => {
    const other = members.find((m) => m !== expect.items[0].member);
    await runCommand('Fabric: Recall Scope…');
    const row = page.locator('.quick-input-widget .quick-input-list .monaco-list-row', { hasText: `team: ${other}` }).first();
    await row.waitFor({ state: 'visible' });
    await row.click();
    await until(`the answer of team:${other}`, async () => {
      const header = clean(await pane('Recall Results').locator('.pane-header').innerText());
      return { ok: header.includes(`team ${other}`), value: header };
    });
    await pane('Recall Results').locator('.pane-header').hover();
    await pane('Recall Results').locator('.pane-header .codicon-collapse-all').first().click();
    const sessions = await until('only that member\'s sessions', async () => {
      const r = await rows('Recall Results');
      return { ok: r.length > 0 && r.every((t) => t.startsWith(`${other} · session `) || /^Load more/.test(t)), value: r };
    });
    const want = new Set(expect.onlyOther.map((i) => short(i.sessionId)));
    const shown = new Set(sessions.filter((t) => !/^Load more/.test(t)).map((t) => t.split(' · session ')[1].slice(0, 8)));
    assert([...shown].every((id) => want.has(id)), `sessions of ${other}: ${[...shown].join(', ')} (want ${[...want].join(', ')})`);
  });
} catch (err) {
  ui.failed += 1;
  console.log('not ok - harness');
  console.log(String(err?.stack ?? err).split('\n').map((l) => `#   ${l}`).join('\n'));
} finally {
  await context?.close().catch(() => undefined);
  await server?.stop().catch(() => undefined);
  if (!opts.keep && ui.failed === 0) fs.rmSync(root, { recursive: true, force: true });
  else console.log(`# kept ${root}`);
  console.log(`${ui.passed} passed, ${ui.failed} failed`);
  process.exit(ui.failed === 0 ? 0 : 1);
}
