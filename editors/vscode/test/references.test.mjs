// The TypeScript reference parser (src/references.ts) against the shared table of cases
// (tests/fixtures/references.json), which the Python and Neovim parsers check too.
// node >= 22.18 loads the .ts source directly (type stripping).
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { ReferenceSyntaxError, findReferences, formatReference, parseReference } from '../src/references.ts';

const cases = JSON.parse(readFileSync(fileURLToPath(new URL('../../../tests/fixtures/references.json', import.meta.url)), 'utf8'));

describe('parseReference (tests/fixtures/references.json)', () => {
  for (const c of cases.parse) {
    test(JSON.stringify(c.text), () => {
      if (c.error) {
        assert.throws(() => parseReference(c.text), (err) => err instanceof ReferenceSyntaxError && err.message.includes('pi-entry:'));
      } else {
        assert.deepEqual(parseReference(c.text), { session: c.session, entry: c.entry, operation: c.operation });
      }
    });
  }
});

describe('findReferences (tests/fixtures/references.json)', () => {
  for (const c of cases.find) {
    test(JSON.stringify(c.text), () => {
      assert.deepEqual(findReferences(c.text).map((r) => [r.sessionId, r.entryId, r.start, r.end]), c.refs);
    });
  }
});

test('formatted references parse back', () => {
  assert.deepEqual(parseReference(formatReference('01a182b4-1092', '97e8c51f')), { session: '01a182b4-1092', entry: '97e8c51f', operation: null });
});

describe('Expand Entry… input (src/refs.ts) goes through the same parser', async () => {
  const { parseEntryInput } = await import('../src/entryInput.ts');
  test('a bare entry id and an operation address use the open session file', () => {
    assert.deepEqual(parseEntryInput('97e8c51f', '/s/x.jsonl').selector, { entryIds: ['97e8c51f'] });
    assert.equal(parseEntryInput('97e8c51f', '/s/x.jsonl').session, '/s/x.jsonl');
    assert.deepEqual(parseEntryInput('97e8c51f/3', '/s/x.jsonl').selector, { operationAddresses: ['97e8c51f/3'] });
    assert.match(parseEntryInput('97e8c51f'), /needs an open session file/);
  });
  test('a session prefix is passed to the server as typed', () => {
    assert.equal(parseEntryInput('01a182b4/97e8c51f').session, '01a182b4');
  });
  test('syntax errors name the forms', () => {
    assert.match(parseEntryInput('97e8 c51f', '/s/x.jsonl'), /pi-entry:<session>\/<entry>/);
  });
});
