// Unit tests of the extension's pure modules (no VS Code needed): rendering of server
// results and the entry-reference inputs. node 24 loads the .ts sources directly.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { fence, fileHistoryItems, formatTime, renderExpand, renderPreview, renderStatus, snippet, describeRecord } from '../src/render.ts';
import { entryIdsOnLines, parseEntryInput, referenceAt } from '../src/entryInput.ts';
import { REFERENCE_IN_TEXT } from '../src/references.ts';
import { LatestOnly } from '../src/latest.ts';
import { explainError, reasonText } from '../src/errors.ts';
import { editTexts, lineAt } from '../src/editDiff.ts';
import { confirmation, escapeMarkdown, planMarkdown, planModel, qaFailureLines, relativePath } from '../src/plan.ts';
import { matchSpans, queryTerms, regexProblem, snippetFor } from '../src/match.ts';
import { searchPage } from '../src/searchPage.ts';
import { branchOf, firstUserGoal, parseEntries } from '../src/jsonl.ts';
import { sessionStatusText } from '../src/statusText.ts';
import { memberDescription, nextScope, scopeTooltip, teamConfigured, teamLabel } from '../src/scopes.ts';
import { setTimeout as sleep } from 'node:timers/promises';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { piDirExists, piDirs, sessionPatterns } from '../src/agentDir.ts';
import { pickServerSettings, restrictedSettings, settingValue } from '../src/trust.ts';
import { expandHome, programKind, setSpawnDir, spawnDir } from '../src/spawnDir.ts';

describe('plan: every branch entry is in the cut map; QA misses once each', () => {
  test('settings entries before the first message are their own range', () => {
    const ids = ['M0', 'T1', 'A0', 'B1', 'K1', 'L9'];
    const types = ['model_change', 'thinking_level_change', 'message', 'message', 'message', 'message'];
    const jsonl = ['{"type":"session","id":"S1"}', ...ids.map((id, i) => JSON.stringify({ type: types[i], id, parentId: i ? ids[i - 1] : null }))].join('\n');
    const m = planModel({ sessionId: 'S1', sessionFile: '/s/a.jsonl', sourceHash: 'ab', leafId: 'L9', tokensBefore: 10, outcome: 'compacted',
      summary: 'x', firstKeptEntryId: 'K1', details: { coverage: { liveCutRange: { first: 'A0', last: 'B1' } } } }, parseEntries(jsonl));
    assert.deepEqual(m.ranges.map((r) => [r.kind, r.count]), [['settings', 2], ['summarized', 2], ['kept', 2]]);
    assert.equal(m.ranges.reduce((n, r) => n + r.count, 0), m.branchLength);
    assert.match(m.ranges[0].title, /model_change, thinking_level_change/);
  });
  test('a fact and its address probe of one answer are one line, unquoted', () => {
    const reason = `summary does not contain expected answer ${JSON.stringify(JSON.stringify('CI is red: assert 0.9999 == 1.0'))}`;
    const lines = qaFailureLines([
      { id: 'earlier-turn-count:126', class: 'content', reason },
      { id: 'earlier-turn-address:126', class: 'address', reason },
      { id: 'x', class: 'address', reason: 'summary does not contain expected answer "source entries 8087f660 → ce3f1cf0"' },
      'missing x',
    ]);
    assert.deepEqual(lines, [
      'Not in the summary: “CI is red: assert 0.9999 == 1.0” (fact and entry address)',
      'Not in the summary: “source entries 8087f660 → ce3f1cf0” (entry address)',
      'missing x',
    ]);
  });
});

describe('Timeline: the before and after of a Pi edit', () => {
  const entry = (calls) => JSON.stringify({ type: 'message', id: 'a1', message: { role: 'assistant', content: calls } });
  test('Pi 1.x edits, Pi 0.80.6 oldText/newText, write, and the call picked by id', () => {
    const v1 = entry([{ type: 'toolCall', id: 't1', name: 'read', arguments: { path: 'x' } },
      { type: 'toolCall', id: 't2', name: 'edit', arguments: { path: 'x', edits: [{ oldText: 'a', newText: 'b' }, { oldText: 'c', newText: 'd' }] } }]);
    const two = editTexts(v1, 't2');
    assert.equal(two.tool, 'edit');
    assert.ok(two.before.includes('replacement 1 of 2') && two.before.includes('a') && two.after.includes('d'), JSON.stringify(two));
    assert.deepEqual(editTexts(entry([{ type: 'toolCall', id: 'e', name: 'edit', arguments: { path: 'x', oldText: 'o', newText: 'n' } }])),
      { before: 'o', after: 'n', tool: 'edit' });
    assert.deepEqual(editTexts(entry([{ type: 'toolCall', id: 'w', name: 'write', arguments: { path: 'x', content: 'all' } }]), 'w'),
      { before: '', after: 'all', tool: 'write' });
    assert.equal(editTexts(v1, 't1'), undefined);
    assert.equal(editTexts('not json'), undefined);
  });
  test('lineAt reads one line (0-based)', () => {
    assert.equal(lineAt('h\nl1\nl2', 1), 'l1');
    assert.equal(lineAt('h\nl1\nl2', 2), 'l2');
    assert.equal(lineAt('h\n', 5), '');
  });
});

describe('errors that help', () => {
  test('an invalid regex names the pattern and the reason, and offers literal words', () => {
    const e = explainError({ code: 'invalid_regex', message: 'Invalid regular expression: /foo(/iu: Unterminated group' }, { pattern: 'foo(' });
    assert.equal(e.text, 'The regular expression “foo(” is not valid: Unterminated group.');
    assert.equal(e.action, 'useLiteral');
  });
  test('an unknown session says what was asked for and how to name one', () => {
    const e = explainError({ code: 'session_not_found', message: 'Session not found: nonsense' });
    assert.equal(e.text, 'No Pi session matches “nonsense”.');
    assert.match(e.hint, /at least 8 characters/);
    assert.equal(e.action, 'pickSession');
  });
  test('an ambiguous prefix keeps the server\'s message (it lists the ids) and names the files once', () => {
    const e = explainError({ code: 'ambiguous_session', message: 'Session id prefix "01a22a5b" matches 2 sessions: a, b; use more characters',
      candidates: ['/s/p/02-x.jsonl', '/s/p/03-y.jsonl'] });
    assert.equal(e.text, 'Session id prefix "01a22a5b" matches 2 sessions: a, b; use more characters.');
    assert.equal(e.hint, 'Or name the file: 02-x.jsonl, 03-y.jsonl.');
  });
  test('a missing session dir keeps the server\'s message (it names the dir) and offers the setting', () => {
    const message = 'The Pi session directory /nope/sessions does not exist. Set the agentDir setting …';
    assert.deepEqual(explainError({ code: 'session_dir_missing', message }), { text: message, action: 'setAgentDir' });
  });
  test('no code reaches the text; unknown reasons read as words', () => {
    for (const code of ['stale_pointer', 'index_out_of_bounds', 'source_unavailable']) {
      assert.ok(!explainError({ code, message: 'Something happened' }).text.includes(code));
    }
    assert.equal(reasonText('some_new_reason'), 'some new reason');
    assert.match(reasonText('indexing_in_progress'), /searched again when indexing completes/);
  });
});

describe('plan as a Markdown file: links a renderer accepts', () => {
  test('relative paths from the document, across drives a file URI', () => {
    assert.equal(relativePath('/home/u/.store/plans', '/home/u/.pi/agent/sessions/a b.jsonl'), '../../.pi/agent/sessions/a b.jsonl');
    assert.equal(relativePath('C:\\Users\\u\\store', 'C:\\Users\\u\\.pi\\s.jsonl'), '../.pi/s.jsonl');
    assert.equal(relativePath('C:\\store', 'D:\\s.jsonl'), undefined);
  });
  test('cut-map links are relative to the file, with the line as #L<n>, and never file:', () => {
    const jsonl = ['{"type":"session","id":"S1"}', ...['A0', 'K1'].map((id, i, all) => JSON.stringify({ type: 'message', id, parentId: i ? all[i - 1] : null }))].join('\n');
    const m = planModel({ sessionId: 'S1', sessionFile: '/p/sessions/(x) #1.jsonl', sourceHash: 'h', leafId: 'K1', tokensBefore: 1,
      outcome: 'compacted', summary: 's', firstKeptEntryId: 'K1', details: {} }, parseEntries(jsonl));
    const md = planMarkdown(m, '/p/store/plans');
    assert.ok(md.includes('(<../../sessions/%28x%29%20%231.jsonl#L2>)'), md);
    assert.ok(!md.includes('file:'), md);
  });
});

describe('confirmation (asked before a compaction request is sent)', () => {
  const jsonl = ['{"type":"session","id":"S1"}',
    ...['A0', 'B1', 'Z9', 'K1', 'L9'].map((id, i, all) => JSON.stringify({ type: 'message', id, parentId: i ? all[i - 1] : null }))].join('\n');
  const base = { sessionId: 'S1', sessionFile: '/s/a.jsonl', sourceHash: 'ab', leafId: 'L9', tokensBefore: 20194 };
  test('names the session by title, the entries replaced and the tokens saved', () => {
    const r = { ...base, outcome: 'compacted', summary: 'x', firstKeptEntryId: 'K1',
      details: { coverage: { liveCutRange: { first: 'A0', last: 'Z9' } }, budget: { projectedTokensAfter: 3684 } } };
    const q = confirmation(planModel(r, parseEntries(jsonl)), 'Fix the parser', r.tokensBefore);
    assert.equal(q.message, 'Compact “Fix the parser”?');
    assert.equal(q.action, 'Compact');
    for (const part of ['Replaces 3 entries (lines 2–4) with a summary, keeping the last 2 as they are.',
      'About 20,194 → 3,684 tokens in context: 16,510 tokens saved.', 'cannot be undone']) {
      assert.ok(q.detail.includes(part), `missing ${part}: ${q.detail}`);
    }
  });
  test('without a token estimate it says nothing about tokens', () => {
    const r = { ...base, tokensBefore: null, outcome: 'compacted', summary: 'x', firstKeptEntryId: 'K1', details: {} };
    const q = confirmation(planModel(r, parseEntries(jsonl)), 'T', null);
    assert.ok(!q.detail.includes('tokens'), q.detail);
  });
  test('nothing to compact: says why, and asks whether to request anyway', () => {
    const r = { ...base, outcome: 'skipped', reason: 'Nothing to compact (session too small)' };
    const q = confirmation(planModel(r, parseEntries(jsonl)), 'T', r.tokensBefore);
    assert.equal(q.action, 'Request Anyway');
    assert.ok(q.message.startsWith('Nothing to compact in “T” now.'), q.message);
    assert.ok(q.detail.startsWith('The preview says: Nothing to compact (session too small).'), q.detail);
  });
});

/** Deterministic pseudo-random strings over an alphabet rich in backticks and newlines. */
function* strings(count, seed = 7) {
  const alphabet = ['`', '``', '```', '````', 'a', ' ', '\n', '~', 'é', '🚀'];
  let x = seed;
  for (let i = 0; i < count; i += 1) {
    let s = '';
    const n = i % 40;
    for (let j = 0; j < n; j += 1) {
      x = (x * 1103515245 + 12345) % 2147483648;
      s += alphabet[x % alphabet.length];
    }
    yield s;
  }
}

describe('fence', () => {
  test('no line of the text can close the fence', () => {
    for (const text of strings(500)) {
      const out = fence(text, 'text');
      const marks = /^(`+)text\n/.exec(out)[1];
      assert.ok(marks.length >= 3);
      const body = out.slice(marks.length + 5, out.length - marks.length);
      assert.ok(!body.includes(marks), `fence ${marks.length} appears inside ${JSON.stringify(text)}`);
      assert.ok(out.endsWith(`\n${marks}`));
      assert.ok(body.startsWith(text));
    }
  });
});

describe('formatTime', () => {
  test('ISO strings and epoch milliseconds', () => {
    assert.equal(formatTime('2026-11-30T02:49:26.753Z'), '2026-11-30 02:49:26');
    assert.equal(formatTime(Date.UTC(2026, 10, 30, 2, 49, 26)), '2026-11-30 02:49:26');
    assert.equal(formatTime(null), '');
    assert.equal(formatTime(undefined), '');
    assert.equal(formatTime(Number.NaN), '');
    assert.equal(formatTime('yesterday'), 'yesterday');
  });
});

describe('snippet', () => {
  test('first non-blank line, whitespace collapsed, cut with an ellipsis', () => {
    assert.equal(snippet('\n\n  hello   world \nsecond'), 'hello world');
    assert.equal(snippet('x'.repeat(200), 10), `${'x'.repeat(9)}…`);
    assert.equal(snippet(''), '');
  });
});

describe('renderPreview (the compaction plan as Markdown)', () => {
  const base = {
    sessionId: 'S1', sessionFile: '/s/a.jsonl', sourceHash: 'ab', leafId: 'L9', tokensBefore: 20194,
  };
  // A branch A0 … Z9, K1 … L9 in file order (line 0 is the header).
  const jsonl = ['{"type":"session","id":"S1"}',
    ...['A0', 'B1', 'Z9', 'K1', 'L9'].map((id, i, all) => JSON.stringify({ type: 'message', id, parentId: i ? all[i - 1] : null }))].join('\n');
  test('a compacted preview: sentence, cut map with lines, budget in words, QA, summary verbatim', () => {
    const md = renderPreview({
      ...base,
      outcome: 'compacted',
      summary: '[Session Goal]\nfix ```it``` __future__\n> quoted?',
      firstKeptEntryId: 'K1',
      details: {
        coverage: { liveCutRange: { first: 'A0', last: 'Z9' } },
        budget: { contextWindow: 200000, targetContextRatio: 0.65, projectedTokensAfter: 3684, bindingConstraint: 'continuity',
          occupancyCeilingTokens: 130000, reductionCeilingTokens: 19184 },
      },
      qa: { score: 1, contentScore: 1, addressScore: 0.5, failures: ['missing x'] },
    }, { instructions: 'Focus', preserve: ['a', 'b'] }, parseEntries(jsonl));
    for (const part of ['Compacting now would replace 3 entries (lines 2–4)', 'keep the last 2 as they are',
      '20,194 → 3,684 tokens of a 200,000\\-token window'.replace('\\-', '-'),
      '**Summarized by this compaction**: 3 entries', '(</s/a.jsonl#L2>)'.replace('</s', '<file:///s'),
      '**Kept verbatim (the recent tail)**: 2 entries', '| Model context window | 200,000 |',
      '| Projected after compaction | 3,684 |', '| Never more than | 19,184 | 95 % of the tokens now |',
      'What decided the cut: the target', '- missing x', 'Instructions: Focus', 'Preserve: 2 item(s)']) {
      assert.ok(md.includes(part), `missing ${part}\n${md}`);
    }
    // The summary's own backticks cannot end its fence early; it is shown verbatim.
    assert.ok(md.includes('````text\n[Session Goal]\nfix ```it``` __future__\n> quoted?\n````'), md);
  });
  test('a skipped preview says why in one sentence', () => {
    const md = renderPreview({ ...base, outcome: 'skipped', reason: 'Nothing to compact' });
    assert.ok(md.includes('Nothing would be compacted: Nothing to compact.'), md);
    assert.ok(md.includes('The QA check was not run.'));
    assert.ok(md.includes('(no summary: skipped)'));
  });
});

describe('escapeMarkdown', () => {
  test('text that looks like Markdown stays text', () => {
    assert.equal(escapeMarkdown('from __future__ import x'), 'from \\_\\_future\\_\\_ import x');
    assert.equal(escapeMarkdown('> not a quote'), '\\> not a quote');
    assert.equal(escapeMarkdown('- not a list'), '\\- not a list');
    assert.equal(escapeMarkdown('1. not a list'), '1\\. not a list');
    assert.equal(escapeMarkdown('a|b `c` [d](e) <f>'), 'a\\|b \\`c\\` \\[d\\](e) \\<f\\>');
  });
});

describe('match (recall snippets)', () => {
  test('terms follow the server tokenizer: word runs, case-insensitive', () => {
    assert.deepEqual(queryTerms('ZeroDivisionError: float-division'), ['zerodivisionerror', 'float', 'division']);
    const text = 'x zerodivisionerror y ZeroDivisionErrors z ZERODIVISIONERROR';
    assert.deepEqual(matchSpans(text, 'ZeroDivisionError').map((s) => text.slice(s.start, s.end)),
      ['zerodivisionerror', 'ZERODIVISIONERROR']);
  });
  test('a tool result snippet is centred on the matching line, not its first line', () => {
    const text = `toolResult(bash) [error]: ==== test session starts ====\nplatform linux\n${'.'.repeat(400)}\nE   ZeroDivisionError: float division by zero\n${'tail '.repeat(40)}`;
    const s = snippetFor(text, 'ZeroDivisionError', 'literal', 80);
    assert.ok(s.matched);
    assert.ok(s.text.startsWith('…'), s.text);
    assert.ok(s.text.length <= 80, `${s.text.length}`);
    assert.equal(s.highlights.length, 1);
    const h = s.highlights[0];
    assert.equal(s.text.slice(h.start, h.end), 'ZeroDivisionError');
    assert.ok(h.start >= 10 && h.start <= 40, `match near the first third: ${h.start}`);
  });
  test('every match inside the snippet is highlighted; no match shows the start', () => {
    const s = snippetFor('rounding rules: rounding\n\n  twice', 'rounding');
    assert.equal(s.text, 'rounding rules: rounding twice');
    assert.deepEqual(s.highlights, [{ start: 0, end: 8 }, { start: 16, end: 24 }]);
    const none = snippetFor('nothing here', 'absent');
    assert.equal(none.matched, false);
    assert.equal(none.text, 'nothing here');
  });
  test('regex mode, and a surrogate pair is never split', () => {
    const s = snippetFor('id 662cb756 and 97e8c51f', '[0-9a-f]{8}', 'regex');
    assert.equal(s.highlights.length, 2);
    for (const text of [`${'🚀'.repeat(100)} needle ${'🚀'.repeat(100)}`]) {
      const t = snippetFor(text, 'needle', 'literal', 41).text;
      assert.ok(!/[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/.test(t), 'lone surrogate');
    }
  });
});

describe('jsonl', () => {
  test('the branch of a leaf, its lines, and the first user goal', () => {
    const text = ['{"type":"session","id":"S"}',
      '{"type":"message","id":"a","parentId":null,"message":{"role":"user","content":[{"type":"text","text":"Fix   the\\nbuild"}]}}',
      'not json',
      '{"type":"message","id":"b","parentId":"a","message":{"role":"assistant","content":[]}}',
      '{"type":"message","id":"c","parentId":"a","message":{"role":"user","content":"other branch"}}'].join('\n');
    const entries = parseEntries(text);
    assert.deepEqual(entries.map((e) => [e.id, e.line]), [['a', 1], ['b', 3], ['c', 4]]);
    assert.deepEqual(branchOf(entries, 'b').map((e) => e.id), ['a', 'b']);
    assert.deepEqual(branchOf(entries).map((e) => e.id), ['a', 'c']);
    assert.equal(firstUserGoal(text), 'Fix the build');
  });
});

describe('session status bar text', () => {
  test('tokens vs window, pending, last commit, live holder', () => {
    const { text, tooltip } = sessionStatusText({ before: 144120, window: 200000 },
      { settled: true, pending: { requestedBy: 'vscode', requestedAt: '2026-11-30T04:16:09Z' },
        last: { at: '2026-11-30T03:02:00Z', requestedBy: 'u', status: 'committed', committedBy: 'pi' }, heldBy: { pid: 42, since: 0 } });
    assert.equal(text, '$(layers) 144k/200k · pending · last 03:02 · live Pi');
    assert.ok(tooltip.includes('pid 42') && tooltip.includes('by Pi'), tooltip);
  });
  test('a session whose usage is not finite (tokensBefore null) shows no count and does not throw', () => {
    const { text, tooltip } = sessionStatusText({ before: null, window: 200000 }, undefined);
    assert.equal(text, '$(layers) Fabric');
    assert.ok(!tooltip.includes('tokens in context'), tooltip);
  });
});

describe('renderExpand', () => {
  test('each entry with its reference, time and line (1-based)', () => {
    const md = renderExpand({
      session: '/s/a.jsonl', sessionId: 'S1', sessionFile: '/s/a.jsonl', sourceHash: 'h', branches: 'active',
      lineageFingerprint: 'f',
      expanded: [{ index: 3, entryId: 'E3', role: 'toolResult', toolName: 'bash', type: 'message',
        timestamp: 1796006946810, isError: true, text: 'boom', line: 16, operationAddress: 'op:1' }],
    });
    for (const part of ['# Session S1', '## toolResult (bash) · ', '— error', 'reference: pi-entry:S1/E3',
      'operation address: `op:1`', 'line 17 (entry index 3)', '```text\nboom\n```']) {
      assert.ok(md.includes(part), `missing ${part}\n${md}`);
    }
  });
});

describe('team recall (docs/team.md)', () => {
  test('a team expand names who pushed it and where the full source is', () => {
    const md = renderExpand({
      session: '/home/bob/.pi/s.jsonl', sessionId: 'S1', sessionFile: '/home/bob/.pi/s.jsonl', sourceHash: 'h', branches: 'active',
      lineageFingerprint: 'f', member: 'bob@test', machine: 'build-02', note: 'stored normalized entries; the full source lives on the member\'s machine',
      expanded: [{ index: 3, entryId: 'E3', role: 'user', type: 'message', timestamp: 1796006946810, text: 'hi', line: 4 }],
    });
    assert.ok(md.includes('- pushed by: bob@test (machine build-02)\n- file (on that machine): `/home/bob/.pi/s.jsonl`'), md);
    assert.ok(md.includes("> stored normalized entries; the full source lives on the member's machine"), md);
    const local = renderExpand({ session: '/s', sessionId: 'S1', sessionFile: '/s', sourceHash: 'h', branches: 'active', lineageFingerprint: 'f', expanded: [] });
    assert.ok(local.includes('- file: `/s`') && !local.includes('pushed by'), local);
  });
  test('the scope button reaches team only when a team database is set', () => {
    const walk = (team) => {
      const seen = ['session'];
      for (let i = 0; i < 4; i += 1) seen.push(nextScope(seen[seen.length - 1], team));
      return seen;
    };
    assert.deepEqual(walk(false), ['session', 'project', 'global', 'session', 'project']);
    assert.deepEqual(walk(true), ['session', 'project', 'global', 'team', 'session']);
    assert.equal(nextScope('team', false), 'session');
    assert.match(scopeTooltip(true), /global → team\)$/);
    assert.equal(teamConfigured(null), false);
    assert.equal(teamConfigured('  '), false);
    assert.equal(teamConfigured('postgresql://db/fabric'), true);
  });
  test('team labels', () => {
    assert.equal(teamLabel('bob@test', 'build-02'), 'bob@test (machine build-02)');
    assert.equal(teamLabel('bob@test', null), 'bob@test');
    assert.equal(teamLabel(null, 'x'), '');
  });
  test('a team member in the scope list: sessions, entries, machines', () => {
    assert.equal(memberDescription({ sessions: 12, entries: 340, machines: ['laptop', 'build-02'] }), '12 sessions · 340 entries · laptop, build-02');
    assert.equal(memberDescription({ sessions: 1, entries: 1, machines: [] }), '1 session · 1 entry');
  });
  test('a team error says what to do', () => {
    const down = explainError({ code: 'team_unavailable', message: 'the team database connection failed: refused; local recall keeps working' });
    assert.equal(down.action, 'teamSettings');
    assert.match(down.text, /^The team database cannot be reached: /);
    const unset = explainError({ code: 'team_not_configured', message: 'team.url is not set' });
    assert.equal(unset.action, 'teamSettings');
    assert.match(unset.hint, /fabric\.team\.url/);
    assert.equal(reasonText('team_push_stale'), 'your newest sessions are not pushed yet (fabric-lsp team push)');
  });
});

describe('renderStatus: the status as a document', () => {
  test('pending with its inputs, the holder that commits, the last commit', () => {
    const md = renderStatus('Fix the tests', '/s/a.jsonl', {
      pending: { requestedBy: 'vscode', requestedAt: '2026-11-30T04:16:09Z', instructions: 'keep the API', preserve: ['tle.py', 'frames.py'] },
      settled: false,
      holders: [{ pid: 42, since: 1 }, { pid: 43, since: 2 }],
      last: { at: '2026-11-30T04:00:00Z', requestedBy: 'u', status: 'committed', tokensBefore: 20194, estimatedTokensAfter: 791, committedBy: 'pi' },
    });
    for (const part of ['# Compaction status — Fix the tests', '- session: `/s/a.jsonl`',
      '- **pending**: requested by vscode at 2026-11-30 04:16:09', '  - instructions: keep the API', '  - preserve: tle.py; frames.py',
      'busy (Pi is in a turn)', 'held by a live Pi (pid 42, pid 43): that Pi commits',
      '- last: committed by Pi at 2026-11-30 04:00:00 (20,194 → ~791 tokens)']) {
      assert.ok(md.includes(part), `missing ${part}\n${md}`);
    }
  });
  test('nothing pending, no holder', () => {
    const md = renderStatus('S', '/s', { settled: true, heldBy: null });
    assert.ok(md.includes('- nothing pending') && md.includes('settled: a compaction can be committed now'), md);
    assert.ok(md.includes('no live Pi holds it: fabric-lsp commits'), md);
    assert.ok(md.includes('no compaction asked for from an editor'), md);
  });
});

describe('describeRecord', () => {
  test('committed and failed records', () => {
    assert.equal(describeRecord({ at: '2026-11-30T04:16:09Z', requestedBy: 'u', status: 'committed', tokensBefore: 20194, estimatedTokensAfter: 791 }),
      'committed at 2026-11-30 04:16:09 (20,194 → ~791 tokens)');
    assert.equal(describeRecord({ at: '2026-11-30T04:16:09Z', requestedBy: 'u', status: 'failed', error: 'stale' }),
      'failed at 2026-11-30 04:16:09: stale');
  });
});

describe('entry references', () => {
  test('every accepted form', () => {
    assert.deepEqual(parseEntryInput(' pi-entry:01a2-b/662cb756 '),
      { session: '01a2-b', selector: { entryIds: ['662cb756'] }, label: '01a2-b 662cb756' });
    assert.deepEqual(parseEntryInput('/tmp/s.jsonl/e1').selector, { entryIds: ['e1'] });
    assert.equal(parseEntryInput('/tmp/s.jsonl/e1').session, '/tmp/s.jsonl');
    // `#N` is JSONL line N, the number every view shows as "line N" (`#L12` too).
    assert.deepEqual(parseEntryInput('S#4').lines, { first: 4, last: 4 });
    assert.deepEqual(parseEntryInput('S#L4-L9').lines, { first: 4, last: 9 });
    assert.equal(parseEntryInput('01a18ac0#452').label, '01a18ac0 line 452');
  });
  test('bad inputs name the problem', () => {
    assert.match(parseEntryInput(''), /Enter/);
    assert.match(parseEntryInput('S#9-4'), /before its start/);
    assert.match(parseEntryInput('S#0'), /start at 1/);
    assert.match(parseEntryInput('pi-entry:-bad/x'), /valid/);
    assert.match(parseEntryInput('just-words'), /Use pi-entry/);
  });
  test('the reference under the cursor', () => {
    const line = 'see pi-entry:S1/E2 and pi-entry:S3/E4 ok';
    assert.equal(referenceAt(line, 0), undefined);
    assert.equal(referenceAt(line, 4), 'pi-entry:S1/E2');
    assert.equal(referenceAt(line, 30), 'pi-entry:S3/E4');
    assert.equal(referenceAt('x pi-entry:S3/E4 y', 17), undefined);
    assert.equal(referenceAt('x pi-entry:S3/E4 y', 16), 'pi-entry:S3/E4');
  });
  test('lines map to the entries on them (the header and bad lines are not entries)', () => {
    const text = '{"type":"session","id":"S"}\n{"type":"message","id":"a"}\nnot json\n{"type":"message","id":"b"}\n';
    assert.deepEqual(entryIdsOnLines(text, 2, 2, 'f'), ['a']);
    assert.deepEqual(entryIdsOnLines(text, 1, 4, 'f'), ['a', 'b']);
    assert.match(entryIdsOnLines(text, 3, 3, 'f'), /line 3 is not a session entry in f/);
    assert.match(entryIdsOnLines(text, 9, 9, 'f'), /has 4 lines; there is no line 9/);
  });
  test('a reference needs a boundary before it (the grammar\'s rule)', () => {
    assert.equal(referenceAt('xpi-entry:S3/E4', 5), undefined);
  });
  test('the regex matches the documented syntax only', () => {
    const re = new RegExp(`^${REFERENCE_IN_TEXT.source}$`);
    assert.ok(re.test('pi-entry:abc/def:1.2-3'));
    assert.ok(!re.test('pi-entry:/def'));
    assert.ok(!re.test('pi-entry:_a/b'));
  });
});

describe('LatestOnly (Recall… live search)', () => {
  function recorder(delayMs) {
    const events = [];
    const latest = new LatestOnly(delayMs, (query, seq) => {
      events.push(['start', query, seq]);
      return { cancel: () => events.push(['cancel', query, seq]) };
    });
    return { events, latest };
  }

  test('typing quickly starts one search, for the last input', async () => {
    const { events, latest } = recorder(30);
    for (const q of ['r', 'ro', 'rou', 'roun']) latest.input(q);
    assert.deepEqual(events, []);
    await sleep(80);
    assert.deepEqual(events, [['start', 'roun', 1]]);
    assert.ok(latest.isLatest(1));
    latest.cancel();
  });

  test('each keystroke cancels the search in flight before the next starts', async () => {
    const { events, latest } = recorder(20);
    latest.input('a');
    await sleep(60);
    latest.input('ab');
    assert.deepEqual(events, [['start', 'a', 1], ['cancel', 'a', 1]]);
    await sleep(60);
    assert.deepEqual(events.at(-1), ['start', 'ab', 2]);
    assert.ok(!latest.isLatest(1), 'the older answer is dropped');
    latest.cancel();
    assert.deepEqual(events.at(-1), ['cancel', 'ab', 2]);
  });

  test('flush() starts a waiting keystroke now and leaves a running search alone', () => {
    const { events, latest } = recorder(10_000);
    latest.now('a');
    latest.flush('a');
    assert.deepEqual(events, [['start', 'a', 1]], 'nothing waiting: the running search is kept');
    latest.input('ab');
    latest.flush('ab');
    assert.deepEqual(events.slice(1), [['cancel', 'a', 1], ['start', 'ab', 2]]);
    latest.flush('ab');
    assert.equal(events.length, 3, 'flushed once');
    latest.cancel();
  });

  test('a cancelled search is no longer the latest: its late answer is dropped', () => {
    const { events, latest } = recorder(10_000);
    latest.now('epoch');
    assert.ok(latest.isLatest(1));
    latest.cancel(); // (the box now holds an invalid pattern: nothing may answer for it)
    assert.deepEqual(events, [['start', 'epoch', 1], ['cancel', 'epoch', 1]]);
    assert.ok(!latest.isLatest(1), 'the answer of the cancelled search is dropped');
    latest.now('next');
    assert.ok(latest.isLatest(2) && !latest.isLatest(1));
    latest.cancel();
  });

  test('now() skips the delay; cancel() stops a pending delay', async () => {
    const { events, latest } = recorder(20);
    latest.input('x');
    latest.cancel();
    await sleep(50);
    assert.deepEqual(events, []);
    latest.now('y');
    assert.deepEqual(events, [['start', 'y', 1]]);
    latest.cancel();
  });
});

describe('fileHistoryItems', () => {
  test('one row per operation, in server order, with the entry reference', () => {
    const op = (over) => ({ sessionId: '01a182b4-aaaa-7000-8000-000000000000', sessionFile: '/s/a.jsonl', cwd: '/p',
      entryId: 'e1', index: 3, action: 'edit', toolName: 'edit', outcome: 'succeeded', timestamp: Date.UTC(2026, 0, 2, 3, 4, 5),
      ref: 'pi-entry:01a182b4-aaaa-7000-8000-000000000000/e1', ...over });
    const rows = fileHistoryItems({ path: '/p/a.py', branches: 'active', totalSessions: 1, totalItems: 2, hasNext: false,
      items: [op({}), op({ action: 'read', outcome: 'failed', operationRef: 'pi.read', operationAddress: 'r1/0', ref: null, index: 9, line: 11 })] });
    assert.deepEqual(rows.map((r) => r.label), ['edit', 'read (failed)']);
    assert.equal(rows[0].description, '01a182b4 · 2026-01-02 03:04:05');
    assert.equal(rows[0].detail, 'pi-entry:01a182b4-aaaa-7000-8000-000000000000/e1');
    assert.ok(rows[1].description.endsWith('via pi.read'));
    // Lines as every view shows them (1-based), never a bare `#index`.
    assert.equal(rows[1].detail, '/s/a.jsonl line 12');
    assert.equal(rows[1].operation.index, 9);
  });
});

describe('Pi dirs: where the server starts and what the client syncs', () => {
  const home = '/home/u';
  test('fabric.agentDir wins over $PI_CODING_AGENT_DIR, which wins over ~/.pi/agent', () => {
    assert.equal(piDirs({ agentDirSetting: '~/a', env: { PI_CODING_AGENT_DIR: '/b' }, home }).agentDir, '/home/u/a');
    assert.equal(piDirs({ env: { PI_CODING_AGENT_DIR: '/b' }, home }).agentDir, '/b');
    const dflt = piDirs({ env: {}, home });
    assert.equal(dflt.agentDir, '/home/u/.pi/agent');
    assert.equal(dflt.source, '~/.pi/agent');
  });
  test('session JSONL patterns: <agentDir>/sessions and fabric.sessionDir, glob characters escaped', () => {
    assert.deepEqual(sessionPatterns(piDirs({ env: {}, home })), ['/home/u/.pi/agent/sessions/**/*.jsonl']);
    assert.deepEqual(sessionPatterns(piDirs({ agentDirSetting: '/x[1]', sessionDirSetting: '/s', env: {}, home })),
      ['/s/**/*.jsonl', '/x[[]1[]]/sessions/**/*.jsonl']);
  });
  test('a missing agent dir keeps the extension dormant; an existing one starts it', () => {
    const root = fs.mkdtempSync(path.join(os.tmpdir(), 'fabric-dirs-'));
    try {
      assert.equal(piDirExists(piDirs({ agentDirSetting: path.join(root, 'none'), env: {}, home })), false);
      fs.mkdirSync(path.join(root, 'agent'));
      assert.equal(piDirExists(piDirs({ agentDirSetting: path.join(root, 'agent'), env: {}, home })), true);
    } finally {
      fs.rmSync(root, { recursive: true, force: true });
    }
  });
});

describe('workspace trust: what an untrusted workspace may not choose', () => {
  const manifest = JSON.parse(fs.readFileSync(new URL('../package.json', import.meta.url), 'utf8'));
  const restricted = restrictedSettings(manifest);
  const props = manifest.contributes.configuration.properties;

  test('every setting that names a directory, a command, an interpreter or an environment is restricted', () => {
    // Found from the manifest itself, so a new such setting cannot be forgotten.
    const describes = (spec) => `${spec.description ?? ''} ${spec.markdownDescription ?? ''}`;
    const pathLike = Object.entries(props)
      .filter(([id, spec]) => /Dir$/.test(id) || id.startsWith('fabric.server.')
        || /\b(directory|interpreter|executable|environment variables)\b/i.test(describes(spec)))
      .map(([id]) => id.slice('fabric.'.length))
      .sort();
    assert.deepEqual(pathLike, ['agentDir', 'indexDir', 'server.command', 'server.env', 'server.python', 'sessionDir']);
    // the team settings decide what leaves the machine: user-level too (docs/team.md)
    const team = Object.keys(props).filter((id) => id.startsWith('fabric.team.')).map((id) => id.slice('fabric.'.length));
    assert.deepEqual(team.sort(), ['team.autoPush', 'team.member', 'team.projects', 'team.url']);
    assert.deepEqual([...restricted].sort(), [...pathLike, ...team].sort());
    // Each is a contributed setting (a typo in restrictedConfigurations would protect nothing).
    for (const key of restricted) assert.ok(props[`fabric.${key}`], `fabric.${key} is contributed`);
    assert.match(manifest.capabilities.untrustedWorkspaces.description, /fabric\.indexDir/);
  });

  const layers = {
    indexDir: { globalValue: undefined, workspaceFolderValue: '~' },
    agentDir: { globalValue: '/home/u/.pi/agent', workspaceValue: '/repo/evil-agent' },
    sessionDir: { workspaceValue: '/repo/sessions' },
    'memory.maxSessions': { globalValue: 100, workspaceValue: 7 },
    'compaction.engine': { workspaceFolderValue: 'pi' },
    codeLens: { defaultValue: true },
  };
  const inspect = (key) => layers[key];
  const keys = Object.keys(layers);

  test('untrusted: no workspace or folder value of a restricted setting reaches the server', () => {
    const out = pickServerSettings(keys, inspect, false, restricted);
    assert.deepEqual(out, {
      agentDir: '/home/u/.pi/agent', // the user's own value
      memory: { maxSessions: 7 }, // not restricted: the workspace may tune it
      compaction: { engine: 'pi' },
      trusted: false,
    });
    assert.equal(JSON.stringify(out).includes('/repo'), false);
    assert.equal('indexDir' in out, false);
  });

  test('trusted: the most specific value of every setting is sent', () => {
    assert.deepEqual(pickServerSettings(keys, inspect, true, restricted), {
      indexDir: '~', agentDir: '/repo/evil-agent', sessionDir: '/repo/sessions',
      memory: { maxSessions: 7 }, compaction: { engine: 'pi' }, trusted: true,
    });
  });

  test('settingValue per layer', () => {
    const i = { defaultValue: [], globalValue: ['/u/fabric-lsp'], workspaceValue: ['./evil'], workspaceFolderValue: ['./evil2'] };
    assert.deepEqual(settingValue(i, false, true), ['/u/fabric-lsp']);
    assert.deepEqual(settingValue(i, true, true), ['./evil2']);
    assert.deepEqual(settingValue(i, false, false), ['./evil2']);
    assert.equal(settingValue({ workspaceValue: 'x' }, false, true), undefined);
    assert.equal(settingValue(undefined, true, true), undefined);
  });

  test('restrictedSettings of a manifest without the capability is empty', () => {
    assert.equal(restrictedSettings({}).size, 0);
  });
});

describe('spawned programs: never relative to the project', () => {
  test('programKind', () => {
    assert.equal(programKind('/usr/bin/fabric-lsp'), 'absolute');
    assert.equal(programKind('~/venv/bin/fabric-lsp'), 'absolute');
    assert.equal(programKind('fabric-lsp'), 'name');
    assert.equal(programKind('python3.12'), 'name');
    assert.equal(programKind('./fabric-lsp'), 'relative');
    assert.equal(programKind('.venv/bin/python'), 'relative');
    assert.equal(programKind('..\\x.exe'), 'relative');
    assert.equal(expandHome('~/a', '/h'), '/h/a');
    assert.equal(expandHome('~', '/h'), '/h');
    assert.equal(expandHome('a~', '/h'), 'a~');
  });
  test('spawnDir is created owner-only and refuses to be used unset', () => {
    const root = fs.mkdtempSync(path.join(os.tmpdir(), 'fabric-spawn-'));
    try {
      setSpawnDir(path.join(root, 'storage', 'deeper'));
      const dir = spawnDir();
      assert.equal(dir, path.join(root, 'storage', 'deeper'));
      assert.equal(fs.statSync(dir).mode & 0o777, 0o700);
      setSpawnDir(undefined);
      assert.throws(() => spawnDir(), /no working directory/);
    } finally {
      fs.rmSync(root, { recursive: true, force: true });
    }
  });
});

describe('Recall Search box (issue 34: the query box in the view)', () => {
  const state = { query: 'ZeroDivisionError', regex: false, scope: 'global', scopes: [['session', 'session'], ['project', 'project'], ['global', 'global']], message: '' };
  test('the page holds the query, the chosen scope and the regex toggle, scripts only by nonce', () => {
    const html = searchPage('vscode-resource:', state, 'N0NCE');
    assert.match(html, /script-src 'nonce-N0NCE'/);
    assert.match(html, /default-src 'none'/);
    assert.match(html, /<input id="q"[^>]*value="ZeroDivisionError"/);
    assert.match(html, /<option value="global" selected>global<\/option>/);
    assert.match(html, /aria-pressed="false"/);
    assert.equal((html.match(/<script/g) ?? []).length, 1);
    assert.match(html, /<script nonce="N0NCE">/);
  });
  test('what the user typed is text, never markup', () => {
    const html = searchPage('x', { ...state, query: '"><img src=x onerror=alert(1)>', message: '<b>bad</b>', scopes: [['team:<m>', 'team: <m>']], scope: 'team:<m>' }, 'N');
    assert.ok(!html.includes('<img'), html);
    assert.ok(!html.includes('<b>bad'), html);
    assert.match(html, /value="&quot;&gt;&lt;img src=x onerror=alert\(1\)&gt;"/);
    assert.match(html, /<option value="team:&lt;m&gt;" selected>team: &lt;m&gt;<\/option>/);
    assert.match(html, /class="box invalid"/);
  });
  test('a fresh nonce per page', () => {
    const a = searchPage('x', state).match(/nonce-([^']+)'/)[1];
    const b = searchPage('x', state).match(/nonce-([^']+)'/)[1];
    assert.notEqual(a, b);
    assert.ok(a.length >= 16);
  });
  test('the regex check: JavaScript\'s own reading, with its reason', () => {
    assert.equal(regexProblem('Zero(Div|Err)'), undefined);
    assert.equal(regexProblem('\\bauth\\w+'), undefined);
    assert.match(regexProblem('Zero(Division'), /^Not a valid regular expression: .*(Unterminated group|missing \))/i);
    assert.match(regexProblem('a{2,1}'), /^Not a valid regular expression/);
  });
});

describe('the status bar words of the background indexer', async () => {
  const { indexStatus, isIndexComplete } = await import('../src/protocol.ts');
  const bg = 'fabric/backgroundIndex';
  test('a running pass shows its progress message with a spinner', () => {
    assert.deepEqual(indexStatus({ type: 'progress', request: bg, message: 'Indexing 3/12 sessions' }), {
      busy: true, words: 'indexing 3/12 sessions', detail: 'Indexing 3/12 sessions.',
    });
  });
  test('a pass that ended with more to do keeps the spinner', () => {
    const s = indexStatus({ type: 'metrics', request: bg, indexedSessions: 5, eligibleSessions: 12 });
    assert.equal(s.busy, true);
    assert.equal(s.words, 'indexed 5/12 sessions');
  });
  test('a complete index names how many sessions, also one', () => {
    const e = { type: 'metrics', request: bg, complete: true, indexedSessions: 7, eligibleSessions: 7 };
    assert.equal(isIndexComplete(e), true);
    assert.deepEqual(
      [indexStatus(e).busy, indexStatus(e).words],
      [false, '7 sessions indexed'],
    );
    assert.equal(indexStatus({ ...e, indexedSessions: 1, eligibleSessions: 1 }).words, '1 session indexed');
    assert.equal(indexStatus({ ...e, indexedSessions: 6 }).words, '6/7 sessions indexed');
    assert.match(indexStatus(e).detail, /whole history is indexed: 7 of 7 sessions/);
  });
  test('other activity is not the indexer\'s news', () => {
    assert.equal(indexStatus({ type: 'progress', request: 'fabric/recall', message: 'Indexing 1/1 sessions' }), undefined);
    assert.equal(indexStatus({ type: 'metrics', request: bg }), undefined);
    assert.equal(indexStatus({ type: 'entity', request: bg }), undefined);
    assert.equal(indexStatus(undefined), undefined);
  });
});

describe('session names in a recall answer', async () => {
  const { sessionNames } = await import('../src/render.ts');
  const s = (sessionId, sessionFile) => ({ sessionId, sessionFile });
  test('eight characters when they tell the sessions apart', () => {
    const names = sessionNames([s('01a22a55-edc4-7a7c-a326-7243dd1f6cb8', '/a/1.jsonl'), s('01a22a5e-04f3-7d72-a761-a098d36e6869', '/a/2.jsonl')]);
    assert.deepEqual([...names.values()].map((n) => n.name), ['01a22a55', '01a22a5e']);
  });
  test('UUIDv7 ids of sessions started within a minute get their next group', () => {
    const names = sessionNames([
      s('01a22a5b-6c55-7f8b-b403-70f78fd8b7c2', '/a/2.jsonl'),
      s('01a22a5b-23e4-707c-bd37-182443495f96', '/a/3.jsonl'),
      s('01a22a5d-d40e-7be4-ba13-ca9a35b030e3', '/a/6.jsonl'),
    ]);
    assert.deepEqual([...names.values()].map((n) => n.name), ['01a22a5b-6c55', '01a22a5b-23e4', '01a22a5d']);
  });
  test('ids that differ late keep more groups, down to the whole id', () => {
    const a = '01a22a5b-23e4-707c-bd37-182443495f96';
    const b = '01a22a5b-23e4-707c-bd37-182443495f97';
    const c = '01a22a5b-23e4-707c-bd38-000000000000';
    const names = sessionNames([s(a, '/a'), s(b, '/b'), s(c, '/c')]);
    assert.deepEqual([...names.values()].map((n) => n.name), [a, b, '01a22a5b-23e4-707c-bd38']);
  });
  test('one id in two files names the files; short ids stay whole', async () => {
    const id = '01a22a5b-23e4-707c-bd37-182443495f96';
    const names = sessionNames([s(id, '/p/03-rpc.jsonl'), s(id, '/p/04-resumed.jsonl'), s('abc', '/p/x.jsonl')]);
    assert.deepEqual([...names.values()], [
      { name: '01a22a5b', file: '03-rpc.jsonl' }, { name: '01a22a5b', file: '04-resumed.jsonl' }, { name: 'abc' },
    ]);
    const { fileNote } = await import('../src/render.ts');
    assert.equal(fileNote(names.get('/p/03-rpc.jsonl')), ' · 03-rpc.jsonl');
    assert.equal(fileNote(names.get('/p/x.jsonl')), '');
  });
});
