// Reading a Pi session JSONL on the client side, for what the server's results do not
// carry: the line of each entry of a branch (the compaction cut map) and the first user
// goal (the Sessions tree's titles). Pure (no vscode import); the unit tests load it.

export interface EntryLine {
  id: string;
  parentId: string | null;
  type: string;
  /** 0-based line in the file. */
  line: number;
  /** For a compaction entry: the entry the model's window restarted from. */
  firstKeptEntryId?: string;
}

/** Entries with an id, in file order; a malformed line is skipped (as Pi does). */
export function parseEntries(text: string): EntryLine[] {
  const out: EntryLine[] = [];
  const lines = text.split('\n');
  for (let i = 0; i < lines.length; i += 1) {
    const raw = lines[i];
    if (!raw.trim()) continue;
    let obj: any;
    try {
      obj = JSON.parse(raw);
    } catch {
      continue;
    }
    if (!obj || typeof obj !== 'object' || typeof obj.id !== 'string' || obj.type === 'session') continue;
    const entry: EntryLine = {
      id: obj.id,
      parentId: typeof obj.parentId === 'string' ? obj.parentId : null,
      type: typeof obj.type === 'string' ? obj.type : 'entry',
      line: i,
    };
    if (obj.type === 'compaction' && typeof obj.firstKeptEntryId === 'string') entry.firstKeptEntryId = obj.firstKeptEntryId;
    out.push(entry);
  }
  return out;
}

/**
 * The branch ending at `leafId` (default: the last entry), root first. An id written twice
 * means its last line (as in Pi); a parent cycle ends the walk.
 */
export function branchOf(entries: EntryLine[], leafId?: string | null): EntryLine[] {
  const byId = new Map<string, EntryLine>();
  for (const e of entries) byId.set(e.id, e);
  let cur = leafId ? byId.get(leafId) : entries[entries.length - 1];
  const path: EntryLine[] = [];
  const seen = new Set<string>();
  while (cur && !seen.has(cur.id)) {
    seen.add(cur.id);
    path.push(cur);
    cur = cur.parentId ? byId.get(cur.parentId) : undefined;
  }
  return path.reverse();
}

function textOf(content: unknown): string {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  return content
    .filter((c) => c && typeof c === 'object' && c.type === 'text' && typeof c.text === 'string')
    .map((c) => c.text as string)
    .join(' ');
}

/**
 * The first user message of a session (its goal), whitespace collapsed, at most `max`
 * characters; '' when the text holds none. `text` may be a cut prefix of the file: a cut
 * last line is skipped.
 */
export function firstUserGoal(text: string, max = 80): string {
  for (const raw of text.split('\n')) {
    if (!raw.includes('"user"')) continue;
    let obj: any;
    try {
      obj = JSON.parse(raw);
    } catch {
      continue;
    }
    const msg = obj?.type === 'message' ? obj.message : undefined;
    if (!msg || msg.role !== 'user') continue;
    const flat = textOf(msg.content).replace(/\s+/g, ' ').trim();
    if (!flat) continue;
    return flat.length > max ? `${flat.slice(0, max - 1)}…` : flat;
  }
  return '';
}
