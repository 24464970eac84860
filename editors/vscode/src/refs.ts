// Entry references and the inputs Expand Entry… accepts. Pure (no vscode import), so
// the unit tests load this file directly.
import { type ParsedReference, ReferenceSyntaxError, parseReference } from './references.ts';

/** `pi-entry:<sessionId>/<entryId>`: the project's one entry-reference syntax. */
export const ENTRY_REF = /pi-entry:([A-Za-z0-9][A-Za-z0-9_.-]*)\/([A-Za-z0-9][A-Za-z0-9_.:-]*)/g;

export interface ParsedEntryInput {
  session: string;
  selector: Record<string, unknown>;
  label: string;
}

function short(id: string): string {
  return id.length > 13 ? id.slice(0, 8) : id;
}

/**
 * Accepted forms: the reference grammar of docs/protocol.md (parsed by ./references.ts:
 * `pi-entry:<session>/<entryId>`, `<session>/<entryId>`, a bare `<entryId>` or
 * `<entryId>/<n>` operation address in the session at hand), plus the index forms
 * `<session>#<index>` and `<session>#<first>-<last>` (an entry range). `<session>` is a
 * session id, a unique id prefix (>= 8 characters) or a path of a session file.
 * `activeSession` (the open session file) is the session of the bare forms.
 * Returns an error message otherwise.
 */
export function parseEntryInput(input: string, activeSession?: string): ParsedEntryInput | string {
  const text = input.trim();
  if (!text) return 'Enter an entry reference';
  const range = /^([^\s#][^#]*)#(\d+)(?:-(\d+))?$/.exec(text);
  if (range && !text.startsWith('pi-entry:')) {
    const first = Number(range[2]);
    const last = range[3] !== undefined ? Number(range[3]) : undefined;
    if (last !== undefined && last < first) return 'The range end is before its start';
    const name = range[1].split(/[\\/]/).pop() ?? range[1];
    return {
      session: range[1],
      selector: last === undefined ? { indices: [first] } : { entryRange: { first, last } },
      label: `${short(name)} #${range[2]}${last !== undefined ? `-${last}` : ''}`,
    };
  }
  let ref: ParsedReference;
  try {
    ref = parseReference(text);
  } catch (err) {
    if (text.startsWith('pi-entry:')) return 'Not a valid pi-entry:<sessionId>/<entryId> reference';
    return err instanceof ReferenceSyntaxError ? `${err.message}; or <session>#<index>[-<last>]` : String(err);
  }
  const session = ref.session ?? activeSession;
  if (!session) {
    return `Use pi-entry:<session>/<entryId>, <session>/<entryId> or <session>#<index>[-<last>]; a bare ${ref.entry} needs an open session file`;
  }
  const selector = ref.operation !== null ? { operationAddresses: [`${ref.entry}/${ref.operation}`] } : { entryIds: [ref.entry] };
  const what = ref.operation !== null ? `${ref.entry}/${ref.operation}` : ref.entry;
  return { session, selector, label: `${short(session.split('/').pop() ?? session)} ${what}` };
}

/** The entry reference whose text covers `character` on `line`, if any. */
export function referenceAt(line: string, character: number): string | undefined {
  for (const m of line.matchAll(new RegExp(ENTRY_REF.source, 'g'))) {
    const start = m.index ?? 0;
    if (character >= start && character <= start + m[0].length) return m[0];
  }
  return undefined;
}
