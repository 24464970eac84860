// The one reference grammar (docs/protocol.md, "Entry references"), in TypeScript. The same
// rules as fabric_lsp/engine/references.py and editors/neovim/lua/fabric/references.lua,
// checked against the same table of cases (tests/fixtures/references.json). Pure (no vscode
// import), so node tests load this file directly.
//
//   pi-entry:<sessionId>/<entryId>   canonical, also found in running text (findReferences)
//   <session>/<entryId>              <session>: an id, an id prefix (>= 8 chars) or a path
//   <entryId>                        an entry of the session at hand (the active session file)
//   <entryId>/<n>                    operation n (1-6 digits) of that entry

export const SCHEME = 'pi-entry';
export const FORMS = 'pi-entry:<session>/<entry>, <session>/<entry>, <entry> or <entry>/<n>';

const SESSION_ID = /^[A-Za-z0-9][A-Za-z0-9_.-]*$/;
const ENTRY_ID = /^[A-Za-z0-9][A-Za-z0-9_.:-]*$/;
/** In running text; the character before `pi-entry:` must not be a letter, digit, `_`, `-` or `.`. */
export const REFERENCE_IN_TEXT = /(?<![A-Za-z0-9_.-])pi-entry:([A-Za-z0-9][A-Za-z0-9_.-]*)\/([A-Za-z0-9][A-Za-z0-9_.:-]*)/g;

export interface ParsedReference {
  /** null for the bare forms: the session at hand decides. An id, id prefix or path otherwise. */
  session: string | null;
  entry: string;
  /** The sequence of an operation address, else null. */
  operation: number | null;
}

export class ReferenceSyntaxError extends Error {}

export function isSessionId(s: string): boolean {
  return SESSION_ID.test(s);
}

export function isEntryId(s: string): boolean {
  return ENTRY_ID.test(s);
}

/** A session part that names a file rather than an id. */
export function isPath(s: string): boolean {
  return s.includes('/') || s.includes('\\') || s.startsWith('~') || s.startsWith('.') || s.startsWith('file://') || s.endsWith('.jsonl');
}

/** Trailing sentence punctuation is not part of an entry id. */
function trimEntry(e: string): string {
  let out = e;
  while (out.length > 1 && (out.endsWith('.') || out.endsWith(':'))) out = out.slice(0, -1);
  return out;
}

function entryPart(text: string, whole: string): string {
  const entry = trimEntry(text);
  if (!isEntryId(entry)) throw new ReferenceSyntaxError(`not an entry id: ${JSON.stringify(text)} in ${JSON.stringify(whole)} (expected ${FORMS})`);
  return entry;
}

const hasSpace = (s: string): boolean => /\s/.test(s);

/**
 * Read one typed reference (surrounding whitespace ignored); throws ReferenceSyntaxError
 * otherwise. Never touches the file system: a session prefix or path is resolved by the server.
 */
export function parseReference(text: string): ParsedReference {
  const whole = text.trim();
  if (!whole) throw new ReferenceSyntaxError(`empty reference (expected ${FORMS})`);
  if (whole.startsWith(`${SCHEME}:`)) {
    const rest = whole.slice(SCHEME.length + 1);
    const slash = rest.indexOf('/');
    const session = slash >= 0 ? rest.slice(0, slash) : '';
    if (slash < 0 || !isSessionId(session)) throw new ReferenceSyntaxError(`not a ${SCHEME}:<session>/<entry> reference: ${JSON.stringify(whole)}`);
    return { session, entry: entryPart(rest.slice(slash + 1), whole), operation: null };
  }
  const last = whole.lastIndexOf('/');
  const head = last >= 0 ? whole.slice(0, last) : '';
  const tail = last >= 0 ? whole.slice(last + 1) : whole;
  // Only a path may hold spaces ("~/My Sessions/x.jsonl/<entry>").
  if (hasSpace(tail) || (!isPath(head) && hasSpace(head))) {
    throw new ReferenceSyntaxError(`a reference has no spaces: ${JSON.stringify(whole)} (expected ${FORMS})`);
  }
  if (last < 0) return { session: null, entry: entryPart(whole, whole), operation: null };
  if (!tail) throw new ReferenceSyntaxError(`missing entry id after '/': ${JSON.stringify(whole)} (expected ${FORMS})`);
  if (/^[0-9]{1,6}$/.test(tail) && isEntryId(head)) return { session: null, entry: head, operation: Number(tail) };
  if (!head) throw new ReferenceSyntaxError(`missing session before '/': ${JSON.stringify(whole)} (expected ${FORMS})`);
  if (!isPath(head) && !isSessionId(head)) {
    throw new ReferenceSyntaxError(`not a session id or path: ${JSON.stringify(head)} in ${JSON.stringify(whole)} (expected ${FORMS})`);
  }
  return { session: head, entry: entryPart(tail, whole), operation: null };
}

export interface FoundReference {
  sessionId: string;
  entryId: string;
  /** UTF-16 offsets in the text searched; `end` is exclusive. */
  start: number;
  end: number;
}

/** Every `pi-entry:` reference in `text`, in order. */
export function findReferences(text: string): FoundReference[] {
  const out: FoundReference[] = [];
  for (const m of text.matchAll(new RegExp(REFERENCE_IN_TEXT.source, 'g'))) {
    const entryId = trimEntry(m[2]);
    const start = m.index ?? 0;
    out.push({ sessionId: m[1], entryId, start, end: start + m[0].length - (m[2].length - entryId.length) });
  }
  return out;
}

/** `pi-entry:<sessionId>/<entryId>`. */
export function formatReference(sessionId: string, entryId: string): string {
  return `${SCHEME}:${sessionId}/${entryId}`;
}
