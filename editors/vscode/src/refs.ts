// Entry references and the inputs Expand Entry… accepts. Pure (no vscode import), so
// the unit tests load this file directly.

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
 * Accepted forms: `pi-entry:<session>/<entryId>`, `<session>/<entryId>`,
 * `<session>#<index>` and `<session>#<first>-<last>` (an entry range). `<session>` is a
 * session id or an absolute path of a session file. Returns an error message otherwise.
 */
export function parseEntryInput(input: string): ParsedEntryInput | string {
  const text = input.trim();
  if (!text) return 'Enter an entry reference';
  const ref = new RegExp(`^${ENTRY_REF.source}$`).exec(text);
  if (ref) return { session: ref[1], selector: { entryIds: [ref[2]] }, label: `${short(ref[1])} ${ref[2]}` };
  if (text.startsWith('pi-entry:')) return 'Not a valid pi-entry:<sessionId>/<entryId> reference';
  const range = /^(.+)#(\d+)(?:-(\d+))?$/.exec(text);
  if (range) {
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
  const slash = text.lastIndexOf('/');
  if (slash > 0 && slash < text.length - 1) {
    const session = text.slice(0, slash);
    const entryId = text.slice(slash + 1);
    return { session, selector: { entryIds: [entryId] }, label: `${short(session.split('/').pop() ?? session)} ${entryId}` };
  }
  return 'Use pi-entry:<session>/<entryId>, <session>/<entryId> or <session>#<index>[-<last>]';
}

/** The entry reference whose text covers `character` on `line`, if any. */
export function referenceAt(line: string, character: number): string | undefined {
  for (const m of line.matchAll(new RegExp(ENTRY_REF.source, 'g'))) {
    const start = m.index ?? 0;
    if (character >= start && character <= start + m[0].length) return m[0];
  }
  return undefined;
}
