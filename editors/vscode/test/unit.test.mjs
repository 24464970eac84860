// Unit tests of the extension's pure modules (no VS Code needed): rendering of server
// results and the entry-reference inputs. node 24 loads the .ts sources directly.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { fence, formatTime, renderExpand, renderPreview, snippet, describeRecord } from '../src/render.ts';
import { ENTRY_REF, parseEntryInput, referenceAt } from '../src/refs.ts';
import { LatestOnly } from '../src/latest.ts';
import { setTimeout as sleep } from 'node:timers/promises';

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

describe('renderPreview', () => {
  const base = {
    sessionId: 'S1', sessionFile: '/s/a.jsonl', sourceHash: 'ab', leafId: 'L9', tokensBefore: 20194,
  };
  test('a compacted preview shows outcome, cut point, budget, QA and the summary', () => {
    const md = renderPreview({
      ...base,
      outcome: 'compacted',
      summary: '[Session Goal]\nfix ```it```',
      firstKeptEntryId: 'K1',
      details: {
        coverage: { liveCutRange: { first: 'A0', last: 'Z9' } },
        budget: { contextWindow: 200000, targetContextRatio: 0.65, projectedTokensAfter: 3684, bindingConstraint: 'continuity' },
      },
      qa: { score: 1, contentScore: 1, addressScore: 0.5, failures: ['missing x'] },
    }, { instructions: 'Focus', preserve: ['a', 'b'] });
    for (const part of ['outcome: **compacted**', 'First kept entry: pi-entry:S1/K1',
      'Summarized: pi-entry:S1/A0 → pi-entry:S1/Z9', '| before | 20,194 |', '| context window | 200,000 |',
      '| target context ratio | 0.65 |', '| projected tokens after | 3,684 |', 'Binding constraint: continuity',
      '| 100.0% | 100.0% | 50.0% | 1 |', '- missing x', 'instructions: Focus', 'preserve: 2 item(s)', '[Session Goal]']) {
      assert.ok(md.includes(part), `missing ${part}\n${md}`);
    }
    // The summary's own backticks cannot end its fence early.
    assert.ok(md.includes('````text\n[Session Goal]\nfix ```it```\n````'));
  });
  test('a skipped preview says why and has no cut point', () => {
    const md = renderPreview({ ...base, outcome: 'skipped', reason: 'Nothing to compact' });
    assert.ok(md.includes('outcome: **skipped** (Nothing to compact)'));
    assert.ok(md.includes('No cut point'));
    assert.ok(md.includes('QA was not run.'));
    assert.ok(md.includes('(no summary)'));
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
      'operation address: `op:1`', 'index 3, line 17', '```text\nboom\n```']) {
      assert.ok(md.includes(part), `missing ${part}\n${md}`);
    }
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
    assert.deepEqual(parseEntryInput('S#4').selector, { indices: [4] });
    assert.deepEqual(parseEntryInput('S#4-9').selector, { entryRange: { first: 4, last: 9 } });
  });
  test('bad inputs name the problem', () => {
    assert.match(parseEntryInput(''), /Enter/);
    assert.match(parseEntryInput('S#9-4'), /before its start/);
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
  test('the regex matches the documented syntax only', () => {
    const re = new RegExp(`^${ENTRY_REF.source}$`);
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
