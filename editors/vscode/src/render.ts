// Markdown renderings of server results for the read-only virtual documents.
// Pure functions (no vscode import) so the same text is produced everywhere.
import { teamLabel } from './scopes.ts';
import type {
  CommitRecord, ExpandResult, ExpandedEntry, FileHistoryResult, FileOperation, PreviewResult, StatusResult,
} from './protocol';
import type { EntryLine } from './jsonl.ts';
import { planMarkdown, planModel } from './plan.ts';

/** QuickPick rows of a `fabric/fileHistory` result (newest first, as the server sorts). */
export function fileHistoryItems(result: FileHistoryResult): { label: string; description: string; detail: string; operation: FileOperation }[] {
  return result.items.map((op) => ({
    label: `${op.action}${op.outcome === 'failed' ? ' (failed)' : ''}`,
    description: `${shortId(op.sessionId)} · ${formatTime(op.timestamp)}${op.operationRef ? ` · via ${op.operationRef}` : ''}`,
    detail: op.ref ?? `${op.sessionFile}${op.line !== undefined ? ` line ${op.line + 1}` : ''}`,
    operation: op,
  }));
}

/** A fence longer than any backtick run in `text`, so entry text can never close it. */
export function fence(text: string, info = ''): string {
  let longest = 0;
  for (const run of text.match(/`+/g) ?? []) longest = Math.max(longest, run.length);
  const marks = '`'.repeat(Math.max(3, longest + 1));
  return `${marks}${info}\n${text}${text.endsWith('\n') ? '' : '\n'}${marks}`;
}

export function entryRef(sessionId: string, entryId: string | null | undefined): string {
  return entryId ? `pi-entry:${sessionId}/${entryId}` : '(entry without id)';
}

export function shortId(id: string): string {
  return id.length > 13 ? id.slice(0, 8) : id;
}

/** Names for sessions listed together (a recall answer), by session file: the shortest
 * prefix of each id, cut where a UUID group ends (8, 13, 18 or 23 characters, else the
 * whole id), that no other id in the list starts with. Pi's ids are UUIDv7, whose first 8
 * characters are a time in units of ~65 s, so sessions started together share them. A
 * session id found in two files (a copied session) also gets its file's name (`file`). */
export function sessionNames(sessions: readonly { sessionId: string; sessionFile: string }[]): Map<string, SessionName> {
  const ids = [...new Set(sessions.map((s) => s.sessionId))];
  const prefix = new Map<string, string>();
  for (const id of ids) {
    if (id.length <= 13) { prefix.set(id, id); continue; }
    const cuts = [8, 13, 18, 23].filter((n) => n < id.length);
    const cut = cuts.find((n) => ids.every((other) => other === id || !other.startsWith(id.slice(0, n)))) ?? id.length;
    prefix.set(id, id.slice(0, cut));
  }
  const files = new Map<string, Set<string>>();
  for (const s of sessions) {
    const set = files.get(s.sessionId) ?? new Set<string>();
    set.add(s.sessionFile);
    files.set(s.sessionId, set);
  }
  const out = new Map<string, SessionName>();
  for (const s of sessions) {
    const name = prefix.get(s.sessionId) ?? shortId(s.sessionId);
    const shared = (files.get(s.sessionId)?.size ?? 0) > 1;
    out.set(s.sessionFile, shared ? { name, file: s.sessionFile.split(/[\\/]/).pop() } : { name });
  }
  return out;
}

export interface SessionName {
  name: string;
  /** the file's base name, when another listed file holds the same session id */
  file?: string;
}

/** " · <file name>" when a listed session needs its file to be told apart, else "". */
export function fileNote(n: SessionName | undefined): string {
  return n?.file ? ` · ${n.file}` : '';
}

export function formatTime(ts: string | number | null | undefined): string {
  if (ts === null || ts === undefined || ts === '') return '';
  // Pi message timestamps are epoch milliseconds; entry timestamps are ISO strings.
  if (typeof ts === 'number') {
    if (!Number.isFinite(ts)) return '';
    ts = new Date(ts).toISOString();
  }
  // ISO 8601 from the session: keep date and time to the second, without zone noise.
  const m = /^(\d{4}-\d{2}-\d{2})T(\d{2}:\d{2}:\d{2})/.exec(ts);
  return m ? `${m[1]} ${m[2]}` : ts;
}

export function roleLabel(e: { role?: string | null; type?: string | null; toolName?: string | null }): string {
  const role = e.role ?? e.type ?? 'entry';
  return e.toolName ? `${role} (${e.toolName})` : role;
}

/** First non-blank line, whitespace collapsed, cut to `max` characters. */
export function snippet(text: string, max = 120): string {
  const line = text.split('\n').map((l) => l.trim()).find((l) => l.length > 0) ?? '';
  const flat = line.replace(/\s+/g, ' ');
  return flat.length > max ? `${flat.slice(0, max - 1)}…` : flat;
}

function entrySection(sessionId: string, e: ExpandedEntry): string {
  const meta = [
    `- role: ${roleLabel(e)}${e.isError ? ' — error' : ''}`,
    e.timestamp ? `- time: ${formatTime(e.timestamp)}` : undefined,
    `- reference: ${entryRef(sessionId, e.entryId)}`,
    e.operationAddress ? `- operation address: \`${e.operationAddress}\`` : undefined,
    `- line ${e.line + 1} (entry index ${e.index})`,
  ].filter((l): l is string => l !== undefined);
  return [`## ${roleLabel(e)} · ${formatTime(e.timestamp) || 'no time'}`, '', ...meta, '', fence(e.text, 'text'), ''].join('\n');
}

export function renderExpand(result: ExpandResult): string {
  // A team expand (docs/team.md): who pushed it; the file is on that member's machine.
  const team = result.member ? teamLabel(result.member, result.machine) : '';
  const lines = [
    `# Session ${result.sessionId}`,
    '',
    ...(team ? [`- pushed by: ${team}`, `- file (on that machine): \`${result.sessionFile}\``] : [`- file: \`${result.sessionFile}\``]),
    `- branches: ${result.branches}`,
    `- source hash: \`${result.sourceHash}\``,
    `- entries: ${result.expanded.length}`,
    '',
    ...(team && result.note ? [`> ${result.note}`, ''] : []),
  ];
  for (const e of result.expanded) lines.push(entrySection(result.sessionId, e));
  return lines.join('\n');
}

function num(value: unknown): string {
  return typeof value === 'number' && Number.isFinite(value) ? value.toLocaleString('en-US') : '—';
}

export interface PreviewInputs {
  instructions?: string;
  preserve?: string[];
}

/**
 * A compaction preview as a valid Markdown document (the plan of ./plan.ts: the outcome in
 * one sentence, the cut map, the budget in plain words, QA, the summary verbatim in a
 * fence). `entries` (./jsonl.ts parseEntries of the session file) gives the cut map its lines.
 */
export function renderPreview(r: PreviewResult, inputs: PreviewInputs = {}, entries: EntryLine[] = []): string {
  return planMarkdown(planModel(r, entries, inputs));
}

export function describeRecord(rec: CommitRecord): string {
  if (rec.status === 'failed') return `failed at ${formatTime(rec.at)}: ${rec.error ?? 'unknown error'}`;
  const tokens = rec.tokensBefore != null
    ? ` (${num(rec.tokensBefore)} → ~${num(rec.estimatedTokensAfter)} tokens)`
    : '';
  const by = rec.committedBy === 'pi' ? ' by Pi' : '';
  return `committed${by} at ${formatTime(rec.at)}${tokens}`;
}

/**
 * `fabric/compact/status` as a document that stays open (not a toast that vanishes): what
 * is pending and who asked, whether the session is settled, which live Pi holds it (and so
 * commits), and the last commit.
 */
export function renderStatus(label: string, session: string, s: StatusResult): string {
  const lines = [`# Compaction status — ${label}`, '', `- session: \`${session}\``];
  const p = s.pending;
  if (p) {
    lines.push(`- **pending**: requested by ${p.requestedBy} at ${formatTime(p.requestedAt)}`);
    if (p.reason) lines.push(`  - reason: ${p.reason}`);
    if (p.instructions) lines.push(`  - instructions: ${p.instructions}`);
    if (p.preserve?.length) lines.push(`  - preserve: ${p.preserve.join('; ')}`);
  } else {
    lines.push('- nothing pending');
  }
  lines.push(s.settled
    ? '- the session is settled: a compaction can be committed now'
    : '- the session is busy (Pi is in a turn): a pending compaction waits for a safe boundary');
  const holders = s.holders?.length ? s.holders : s.heldBy ? [s.heldBy] : [];
  lines.push(holders.length
    ? `- held by a live Pi (${holders.map((h) => `pid ${h.pid}`).join(', ')}): that Pi commits a pending compaction`
    : '- no live Pi holds it: fabric-lsp commits a pending compaction by one safe append');
  lines.push(s.last
    ? `- last: ${describeRecord(s.last)}`
    : '- no compaction asked for from an editor has been committed or has failed yet');
  return `${lines.join('\n')}\n`;
}
