// What Expand Entry… accepts: the reference grammar (./references.ts) plus the line forms
// `<session>#<line>` and `<session>#<first>-<last>` (JSONL lines, 1-based: the numbers every
// view shows as "line N"). Pure (no vscode import), so the unit tests load this file directly.
import { type ParsedReference, ReferenceSyntaxError, findReferences, parseReference } from './references.ts';

export interface ParsedEntryInput {
  session: string;
  /** An expand selector, or `lines` (1-based, inclusive): the caller maps lines to entry ids. */
  selector: Record<string, unknown>;
  lines?: { first: number; last: number };
  label: string;
}

/**
 * The ids of the entries on JSONL lines `first`..`last` (1-based, inclusive) of `text`, in
 * file order; a line that is not an entry with an id (the header, a malformed line) is
 * skipped. A message naming the lines when none is an entry.
 */
export function entryIdsOnLines(text: string, first: number, last: number, file: string): string[] | string {
  const lines = text.split('\n');
  if (lines.length > 0 && lines[lines.length - 1] === '') lines.pop();
  if (first > lines.length) return `${file} has ${lines.length} lines; there is no line ${first}`;
  const ids: string[] = [];
  for (let n = first; n <= Math.min(last, lines.length); n += 1) {
    try {
      const obj = JSON.parse(lines[n - 1]);
      if (obj && typeof obj.id === 'string' && obj.type !== 'session') ids.push(obj.id);
    } catch {
      // Not an entry.
    }
  }
  if (ids.length === 0) return `${first === last ? `line ${first} is` : `lines ${first}–${last} are`} not a session entry in ${file}`;
  return ids;
}

function short(id: string): string {
  return id.length > 13 ? id.slice(0, 8) : id;
}

/**
 * Accepted forms: the reference grammar of docs/protocol.md (parsed by ./references.ts:
 * `pi-entry:<session>/<entryId>`, `<session>/<entryId>`, a bare `<entryId>` or
 * `<entryId>/<n>` operation address in the session at hand), plus the line forms
 * `<session>#<line>` and `<session>#<first>-<last>` (JSONL lines, 1-based; `#L12` too). `<session>` is a
 * session id, a unique id prefix (>= 8 characters) or a path of a session file.
 * `activeSession` (the open session file) is the session of the bare forms.
 * Returns an error message otherwise.
 */
export function parseEntryInput(input: string, activeSession?: string): ParsedEntryInput | string {
  const text = input.trim();
  if (!text) return 'Enter an entry reference';
  const range = /^([^\s#][^#]*)#L?(\d+)(?:-L?(\d+))?$/.exec(text);
  if (range && !text.startsWith('pi-entry:')) {
    const first = Number(range[2]);
    const last = range[3] !== undefined ? Number(range[3]) : first;
    if (first < 1) return 'Lines start at 1';
    if (last < first) return 'The range end is before its start';
    const name = range[1].split(/[\\/]/).pop() ?? range[1];
    return {
      session: range[1],
      selector: {},
      lines: { first, last },
      label: `${short(name)} ${first === last ? `line ${first}` : `lines ${first}–${last}`}`,
    };
  }
  let ref: ParsedReference;
  try {
    ref = parseReference(text);
  } catch (err) {
    if (text.startsWith('pi-entry:')) return 'Not a valid pi-entry:<sessionId>/<entryId> reference';
    return err instanceof ReferenceSyntaxError ? `${err.message}; or <session>#<line>[-<last>]` : String(err);
  }
  const session = ref.session ?? activeSession;
  if (!session) {
    return `Use pi-entry:<session>/<entryId>, <session>/<entryId> or <session>#<line>[-<last>]; a bare ${ref.entry} needs an open session file`;
  }
  const selector = ref.operation !== null ? { operationAddresses: [`${ref.entry}/${ref.operation}`] } : { entryIds: [ref.entry] };
  const what = ref.operation !== null ? `${ref.entry}/${ref.operation}` : ref.entry;
  return { session, selector, label: `${short(session.split('/').pop() ?? session)} ${what}` };
}

/** The entry reference whose text covers `character` on `line`, if any (the grammar's own rule). */
export function referenceAt(line: string, character: number): string | undefined {
  for (const r of findReferences(line)) {
    if (character >= r.start && character <= r.end) return line.slice(r.start, r.end);
  }
  return undefined;
}
