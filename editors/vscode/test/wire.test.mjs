// Wire test: the real fabric-lsp process over stdio, driven with vscode-jsonrpc the way
// vscode-languageclient drives it. Run: node --test test/wire.test.mjs
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { pathToFileURL } from 'node:url';
import {
  createMessageConnection, CancellationTokenSource, StreamMessageReader, StreamMessageWriter, ResponseError,
} from 'vscode-jsonrpc/node';
import { PROJECT_CWD, header, makeAgentDir, readLines, serverCommand } from './fixtures.mjs';

const TIMEOUT = 30_000;

function withTimeout(promise, what, ms = TIMEOUT) {
  let timer;
  return Promise.race([
    promise.finally(() => clearTimeout(timer)),
    new Promise((_, reject) => { timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms: ${what}`)), ms); }),
  ]);
}

describe('fabric-lsp over stdio', { timeout: 120_000 }, () => {
  let proc;
  let conn;
  let tmp;
  let init;
  let stderr = '';
  const progress = [];
  const messages = [];
  const createdTokens = [];
  const configRequests = [];
  const progressWaiters = new Set();

  // Resolves once `done()` holds, re-checked on every $/progress notification.
  const progressUntil = (done, what) => withTimeout(new Promise((resolve) => {
    const check = () => { if (done()) { progressWaiters.delete(check); resolve(); } };
    progressWaiters.add(check);
    check();
  }), what);

  const request = (method, params) => withTimeout(conn.sendRequest(method, params), method);

  before(async () => {
    tmp = makeAgentDir('fabric-wire-');
    const [cmd, ...args] = serverCommand();
    proc = spawn(cmd, args, {
      stdio: ['pipe', 'pipe', 'pipe'],
      env: { ...process.env, PI_CODING_AGENT_DIR: tmp.agentDir, HOME: tmp.root },
      cwd: tmp.root,
    });
    proc.stderr.on('data', (d) => { stderr += d.toString(); });
    conn = createMessageConnection(new StreamMessageReader(proc.stdout), new StreamMessageWriter(proc.stdin));
    conn.onRequest('window/workDoneProgress/create', (p) => { createdTokens.push(p.token); return null; });
    conn.onRequest('workspace/configuration', (p) => {
      configRequests.push(p);
      return p.items.map((item) => (item.section === 'fabric' ? { agentDir: tmp.agentDir, trusted: false } : null));
    });
    conn.onRequest('client/registerCapability', () => null);
    conn.onNotification('$/progress', (p) => {
      progress.push(p);
      for (const waiter of [...progressWaiters]) waiter();
    });
    conn.onNotification('window/showMessage', (p) => messages.push(p));
    conn.onNotification('window/logMessage', () => undefined);
    conn.onNotification(() => undefined);
    conn.listen();
    init = await withTimeout(conn.sendRequest('initialize', {
      processId: process.pid,
      clientInfo: { name: 'wire-test' },
      rootUri: null,
      workspaceFolders: null,
      capabilities: {
        window: { workDoneProgress: true, showMessage: {} },
        workspace: { configuration: true, workspaceFolders: true },
        textDocument: { hover: { contentFormat: ['markdown', 'plaintext'] }, synchronization: {} },
      },
      initializationOptions: { agentDir: tmp.agentDir, trusted: false },
    }), 'initialize');
    await conn.sendNotification('initialized', {});
  });

  after(async () => {
    try {
      if (conn && proc.exitCode === null) {
        await withTimeout(conn.sendRequest('shutdown'), 'shutdown', 10_000);
        await conn.sendNotification('exit');
        await withTimeout(new Promise((resolve) => (proc.exitCode !== null ? resolve() : proc.on('exit', resolve))), 'exit', 10_000);
      }
    } finally {
      conn?.dispose();
      if (proc && proc.exitCode === null) proc.kill('SIGKILL');
      tmp?.cleanup();
    }
  });

  test('initialize: serverInfo, hover, executeCommand ids', () => {
    assert.equal(init.serverInfo?.name, 'fabric-lsp');
    assert.match(init.serverInfo?.version ?? '', /^\d+\.\d+/);
    assert.ok(init.capabilities.hoverProvider, 'hoverProvider');
    assert.ok(init.capabilities.definitionProvider, 'definitionProvider');
    // The contract's commands must all be there (the extension's UI ids must not clash).
    const commands = init.capabilities.executeCommandProvider?.commands ?? [];
    for (const id of ['fabric.compact.cancel', 'fabric.compact.request', 'fabric.compact.status',
      'fabric.compactionPreview', 'fabric.expand', 'fabric.recall', 'fabric.reload', 'fabric.sessions']) {
      assert.ok(commands.includes(id), `${id} in ${commands}`);
    }
    assert.ok(!commands.some((id) => id.startsWith('fabricLsp.')), 'no clash with the UI command ids');
  });

  test('fabric/sessions lists the fixture sessions, newest first', async () => {
    const res = await request('fabric/sessions', { scope: 'global' });
    assert.equal(res.totalItems, 6);
    assert.equal(res.sessions.length, 6);
    const files = new Set(Object.values(tmp.files).map((f) => fs.realpathSync(f)));
    for (const s of res.sessions) {
      assert.ok(files.has(fs.realpathSync(s.sessionFile)), s.sessionFile);
      assert.equal(s.sessionId, header(s.sessionFile).id);
      assert.equal(s.cwd, PROJECT_CWD);
      assert.ok(s.entryCount > 0);
      assert.ok(['hot', 'cold'].includes(s.tier));
    }
    const project = await request('fabric/sessions', { scope: 'project', cwd: PROJECT_CWD });
    assert.equal(project.totalItems, 6);
  });

  test('fabric/recall finds an entry and its line in the JSONL', async () => {
    const res = await request('fabric/recall', { query: 'rounding rules', scope: 'global' });
    assert.ok(res.items.length > 0, JSON.stringify(res).slice(0, 500));
    assert.equal(typeof res.text, 'string');
    assert.match(res.text, /pi-entry:[A-Za-z0-9][A-Za-z0-9_.-]*\/[A-Za-z0-9]/);
    const segment = res.items.find((i) => i.kind === 'segment')?.segment;
    assert.ok(segment, 'a segment item');
    const hit = segment.entries.find((e) => e.matched);
    assert.ok(hit, 'a matched entry');
    const line = JSON.parse(readLines(segment.sessionFile)[hit.line]);
    assert.equal(line.id, hit.entryId);
  });

  test('fabric/recall rejects unknown keys and scopes with -32602', async () => {
    await assert.rejects(request('fabric/recall', { query: 'x', bogus: 1 }),
      (err) => err instanceof ResponseError && err.code === -32602 && /bogus/.test(err.message));
    await assert.rejects(request('fabric/recall', { query: 'x', scope: 'everywhere' }),
      (err) => err instanceof ResponseError && err.code === -32602);
  });

  test('fabric/expand returns the entry text at its line', async () => {
    const file = tmp.files['02'];
    const res = await request('fabric/expand', { session: file, entryIds: ['662cb756'] });
    assert.equal(res.error, undefined, JSON.stringify(res.error));
    assert.equal(res.sessionId, header(file).id);
    assert.equal(res.expanded.length, 1);
    assert.equal(res.expanded[0].entryId, '662cb756');
    assert.equal(res.expanded[0].line, 16);
    assert.match(res.expanded[0].text, /CHANGELOG/);
    const missing = await request('fabric/expand', { session: file, entryIds: ['nope0000'] });
    assert.equal(missing.error?.code, 'address_not_found');
  });

  test('fabric/compactionPreview summarizes a session with a cut point and QA', async () => {
    const file = tmp.files['02'];
    const res = await request('fabric/compactionPreview', { session: file, includeQa: true });
    assert.equal(res.sessionId, header(file).id);
    // <agentDir>/settings.json keeps 4000 recent tokens, so there is something to compact.
    assert.equal(res.outcome, 'compacted', JSON.stringify(res).slice(0, 400));
    assert.ok(res.tokensBefore > 4000);
    assert.ok(res.summary.length > 0);
    assert.ok(readLines(file).some((l) => JSON.parse(l).id === res.firstKeptEntryId), 'cut point is an entry of the file');
    assert.equal(typeof res.qa?.score, 'number');
    assert.equal(typeof res.details?.budget?.projectedTokensAfter, 'number');
    // Same input, same bytes.
    const again = await request('fabric/compactionPreview', { session: file, includeQa: true });
    assert.equal(again.summary, res.summary);
  });

  test('server-created progress: one begin and one end per token', async () => {
    await request('fabric/recall', { query: 'CHANGELOG', scope: 'global' });
    assert.ok(createdTokens.length > 0, 'server created a progress token');
    const kindsOf = (token) => progress.filter((p) => p.token === token).map((p) => p.value.kind);
    // A request's own progress ends before its answer; a background indexing pass that
    // began meanwhile ends on its own time, so wait for every begun token's end.
    await progressUntil(
      () => createdTokens.every((t) => kindsOf(t).length === 0 || kindsOf(t).includes('end')),
      'an end for every begun progress token',
    );
    for (const token of createdTokens) {
      const kinds = kindsOf(token);
      if (kinds.length === 0) continue;
      assert.equal(kinds[0], 'begin', `token ${token}: ${kinds}`);
      assert.equal(kinds.filter((k) => k === 'begin').length, 1);
      assert.equal(kinds.filter((k) => k === 'end').length, 1);
      assert.equal(kinds[kinds.length - 1], 'end');
    }
  });

  test('hover on a session line and on an entry reference', async () => {
    const file = tmp.files['02'];
    const uri = pathToFileURL(file).href;
    const text = fs.readFileSync(file, 'utf8');
    await conn.sendNotification('textDocument/didOpen', { textDocument: { uri, languageId: 'jsonl', version: 1, text } });
    const hover = await request('textDocument/hover', { textDocument: { uri }, position: { line: 16, character: 5 } });
    assert.ok(hover, 'hover on a JSONL line');
    assert.match(JSON.stringify(hover.contents), /662cb756/);

    const id = header(file).id;
    const noteUri = pathToFileURL(path.join(tmp.root, 'note.md')).href;
    const note = `See pi-entry:${id}/662cb756 for the request.\n`;
    await conn.sendNotification('textDocument/didOpen', { textDocument: { uri: noteUri, languageId: 'markdown', version: 1, text: note } });
    const refHover = await request('textDocument/hover', { textDocument: { uri: noteUri }, position: { line: 0, character: 10 } });
    assert.ok(refHover, 'hover on an entry reference');
    assert.match(JSON.stringify(refHover.contents), /CHANGELOG/);
  });

  test('compaction intents: request, status, cancel', async () => {
    // 02 has something to compact at 4000 kept tokens (a request Pi could not honour,
    // "Nothing to compact", is refused when it is made)
    const file = tmp.files['02'];
    const before = fs.readFileSync(file);
    const req = await request('fabric/compact/request', { session: file, instructions: 'Keep the calc API', requestedBy: 'wire-test' });
    assert.equal(req.pending?.requestedBy, 'wire-test');
    const status = await request('fabric/compact/status', { session: file });
    assert.equal(typeof status.settled, 'boolean');
    const cancelled = await request('fabric/compact/cancel', { session: file });
    assert.equal(typeof cancelled.cancelled, 'boolean');
    const after = await request('fabric/compact/status', { session: file });
    assert.ok(!after.pending, 'nothing pending after cancel');
    const now = fs.readFileSync(file);
    if (cancelled.cancelled) {
      // Cancelled before any commit: the session file is untouched.
      assert.deepEqual(now, before);
    } else {
      // The committer settled the (quiet) session's intent first: at most appended to.
      assert.ok(now.subarray(0, before.length).equals(before), 'only ever appended to');
    }
  });

  test('an unknown command is an error, and the server stays up', async () => {
    await assert.rejects(request('workspace/executeCommand', { command: 'fabric.nope', arguments: [] }),
      (err) => err instanceof ResponseError);
    const res = await request('workspace/executeCommand', { command: 'fabric.sessions', arguments: [{ scope: 'global' }] });
    assert.equal(res.totalItems, 6);
  });

  test('$/cancelRequest (what Recall… sends on each keystroke) answers -32800 or the result', async () => {
    for (let i = 0; i < 3; i += 1) {
      const source = new CancellationTokenSource();
      const pending = conn.sendRequest('fabric/recall', { query: `rounding ${i}`, scope: 'global' }, source.token);
      source.cancel();
      const outcome = await withTimeout(pending.then(
        (res) => (Array.isArray(res.items) ? 'result' : 'bad result'),
        (err) => (err instanceof ResponseError ? err.code : String(err)),
      ), 'a cancelled recall');
      assert.ok(outcome === 'result' || outcome === -32800, `outcome ${outcome}`);
    }
    // Still serving, and a later identical search is complete (nothing half-cached). A
    // late answer to the server's own progress-create must not surface as an error
    // message either (checked by the next test).
    const res = await request('fabric/recall', { query: 'rounding rules', scope: 'global' });
    assert.ok(res.items.length > 0);
  });

  test('a client workDoneToken (as Recall… sends): progress on that token, clean cancellation', async () => {
    const created = createdTokens.length;
    await request('fabric/recall', { query: 'CHANGELOG entry', scope: 'global', workDoneToken: 'wire-recall-1' });
    const kinds = progress.filter((p) => p.token === 'wire-recall-1').map((p) => p.value.kind);
    if (kinds.length > 0) {
      assert.equal(kinds[0], 'begin', String(kinds));
      assert.equal(kinds.at(-1), 'end', String(kinds));
      assert.equal(kinds.filter((k) => k === 'end').length, 1);
    }
    for (let i = 0; i < 3; i += 1) {
      const source = new CancellationTokenSource();
      const pending = conn.sendRequest('fabric/recall', { query: `changelog ${i}`, scope: 'global', workDoneToken: `wire-cancel-${i}` }, source.token);
      source.cancel();
      const outcome = await withTimeout(pending.then(() => 'result', (err) => (err instanceof ResponseError ? err.code : String(err))), 'a cancelled recall');
      assert.ok(outcome === 'result' || outcome === -32800, `outcome ${outcome}`);
    }
    assert.equal(createdTokens.length, created, 'the server created no token of its own');
  });

  test('nothing but JSON-RPC on stdout, no warning or error messages', () => {
    // Every byte of stdout went through the message reader; a stray print would have
    // broken a later request above. A warning would mean our settings shape is wrong; an
    // error, that a cancellation above went wrong on the server.
    assert.deepEqual(messages.filter((m) => m.type <= 2), [], `stderr:\n${stderr.slice(-2000)}`);
  });

});
