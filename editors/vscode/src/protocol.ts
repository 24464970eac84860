// Wire types of the fabric-lsp custom requests (see docs/protocol.md). Only the fields
// the extension reads are typed; everything else passes through untouched.

export const Method = {
  sessions: 'fabric/sessions',
  recall: 'fabric/recall',
  expand: 'fabric/expand',
  compactionPreview: 'fabric/compactionPreview',
  compactRequest: 'fabric/compact/request',
  compactStatus: 'fabric/compact/status',
  compactCancel: 'fabric/compact/cancel',
  compactionCommitted: 'fabric/compactionCommitted',
  fileHistory: 'fabric/fileHistory',
  teamMembers: 'fabric/teamMembers',
  activity: 'fabric/activity',
} as const;

/** A `fabric/activity` event; the background indexer's are tagged `request: "fabric/backgroundIndex"`:
 * progress ("Indexing N/M sessions") while a pass runs, metrics at its end, `complete` once
 * nothing is left to index. */
export interface ActivityEvent {
  type: 'progress' | 'entity' | 'metrics';
  request?: string;
  complete?: boolean;
  message?: string;
  indexedSessions?: number;
  eligibleSessions?: number;
}

/** What the status bar says of the background indexer's event (undefined: not its news). */
export interface IndexStatus {
  busy: boolean;
  words: string;
  detail: string;
}

export function indexStatus(e: ActivityEvent | undefined): IndexStatus | undefined {
  if (e?.request !== 'fabric/backgroundIndex') return undefined;
  if (e.type === 'progress' && typeof e.message === 'string' && e.message !== '') {
    return { busy: true, words: e.message.charAt(0).toLowerCase() + e.message.slice(1), detail: `${e.message}.` };
  }
  const n = e.indexedSessions;
  const m = e.eligibleSessions;
  if (e.type !== 'metrics' || typeof n !== 'number' || typeof m !== 'number') return undefined;
  const sessions = (k: number) => `${k} session${k === 1 ? '' : 's'}`;
  if (e.complete === true) {
    return {
      busy: false,
      words: n === m ? `${sessions(m)} indexed` : `${n}/${sessions(m)} indexed`,
      detail: `The whole history is indexed: ${n} of ${sessions(m)}; recall, file history and CodeLens answer from all of them.`,
    };
  }
  return { busy: true, words: `indexed ${n}/${sessions(m)}`, detail: `Indexing the history: ${n} of ${sessions(m)} so far.` };
}

/** True for the event that says the whole history is indexed (docs/protocol.md, Notifications). */
export function isIndexComplete(e: ActivityEvent | undefined): boolean {
  return e?.type === 'metrics' && e.request === 'fabric/backgroundIndex' && e.complete === true;
}

/** `fabric/teamMembers`: who pushed to the team database (docs/team.md). */
export interface TeamMember {
  member: string;
  machines: string[];
  sessions: number;
  entries: number;
  lastPushedAt: string;
}

export interface TeamMembersResult {
  members: TeamMember[];
  error?: { code: string; message: string };
}

export interface FileOperation {
  sessionId: string;
  sessionFile: string;
  cwd: string | null;
  entryId: string | null;
  index: number;
  /** 0-based line of the entry in sessionFile (absent when the index does not know it). */
  line?: number;
  /** The Pi tool call (its id in the assistant entry's content). */
  toolCallId?: string;
  operationAddress?: string;
  action: 'read' | 'edit' | 'write';
  toolName: string;
  outcome: 'succeeded' | 'failed';
  timestamp: string | number | null;
  ref: string | null;
  operationRef?: string;
}

export interface FileHistoryResult {
  path: string;
  branches: 'active' | 'all';
  totalSessions: number;
  totalItems: number;
  hasNext: boolean;
  items: FileOperation[];
}

export interface Coverage {
  complete: boolean;
  indexedSessions: number;
  eligibleSessions: number;
  staleSessions: number;
  incompleteSessions: number;
  reasons: string[];
  error?: { code: string; message: string };
}

export interface SessionInfo {
  sessionId: string;
  sessionFile: string;
  uri: string;
  cwd: string;
  firstTs?: string | null;
  lastTs?: string | null;
  entryCount: number;
  sizeBytes: number;
  mtime: number | string;
  tier: 'hot' | 'cold';
  leafId?: string | null;
}

export interface SessionsResult {
  sessions: SessionInfo[];
  totalItems: number;
  page: number;
  pageSize: number;
  hasNext: boolean;
  coverage: Coverage;
}

export interface SegmentEntry {
  index: number;
  entryId: string | null;
  parentId: string | null;
  type: string | null;
  role: string | null;
  toolName?: string | null;
  timestamp?: string | number | null;
  isError?: boolean;
  truncated?: boolean;
  text: string;
  matched: boolean;
  line: number;
}

export interface Segment {
  tier: 'hot' | 'cold';
  sessionId: string;
  sessionFile: string;
  sourceHash: string;
  branches: string;
  lineageFingerprint: string;
  entryRange: { first: number; last: number };
  score: number;
  matchedCount: number;
  entries: SegmentEntry[];
  /** A team answer's item (docs/team.md): who pushed the session, from which machine. */
  member?: string | null;
  machine?: string | null;
}

export interface Pointer {
  tier: 'cold';
  sessionId: string;
  sessionFile: string;
  sourceHash: string;
  branches: string;
  matchedTerms: string[];
  score: number;
  cwd?: string;
  lastTs?: string | null;
}

export type RecallItem = { kind: 'segment'; segment: Segment } | { kind: 'pointer'; pointer: Pointer };

export interface RecallParams {
  query?: string;
  queryMode?: 'literal' | 'regex';
  scope?: string;
  branches?: 'active' | 'all';
  page?: number;
  pageSize?: number;
  cwd?: string;
}

export interface RecallResult {
  scope: string;
  branches: string;
  query: string;
  queryMode: string;
  page: number;
  pageSize: number;
  totalItems: number;
  totalMatches: number;
  hasNext: boolean;
  authoritative: boolean;
  coverage: Coverage;
  items: RecallItem[];
  text: string;
}

export interface ExpandedEntry {
  index: number;
  entryId: string | null;
  operationAddress?: string | null;
  role: string | null;
  toolName?: string | null;
  type: string | null;
  timestamp?: string | number | null;
  isError: boolean;
  text: string;
  line: number;
}

export interface DomainError {
  error: { code: string; message: string; candidates?: string[] };
}

export interface ExpandResult {
  session: string;
  sessionId: string;
  sessionFile: string;
  sourceHash: string;
  branches: string;
  lineageFingerprint: string;
  expanded: ExpandedEntry[];
  /** A team expand: the member who pushed it, the machine, and where the full source is. */
  member?: string | null;
  machine?: string | null;
  note?: string | null;
}

export interface QaReport {
  score: number;
  contentScore: number;
  addressScore: number;
  failures: unknown[];
}

export interface PreviewParams {
  session: string;
  instructions?: string;
  preserve?: string[];
  includeQa?: boolean;
}

export interface PreviewResult {
  outcome: 'compacted' | 'cancelled' | 'skipped';
  reason?: string | null;
  summary?: string | null;
  firstKeptEntryId?: string | null;
  /** null when the session's usage is not a finite number (JSON.stringify(Infinity)) */
  tokensBefore: number | null;
  details?: Record<string, unknown> | null;
  qa?: QaReport | null;
  sessionId: string;
  sessionFile: string;
  sourceHash: string;
  leafId?: string | null;
}

export interface Intent {
  reason?: string | null;
  instructions?: string | null;
  preserve?: string[] | null;
  requestedBy: string;
  requestedAt: string;
}

export interface CommitRecord {
  at: string;
  requestedBy: string;
  status: 'committed' | 'failed';
  summary?: string | null;
  tokensBefore?: number | null;
  estimatedTokensAfter?: number | null;
  error?: string | null;
  entryId?: string | null;
  /** "pi": the live Pi committed it (the Pi extension, docs/pi.md). */
  committedBy?: 'pi' | 'fabric-lsp' | null;
}

export interface LeaseHolder {
  pid: number;
  since: number;
  leafId?: string | null;
}

export interface StatusResult {
  pending?: Intent | null;
  last?: CommitRecord | null;
  settled: boolean;
  /** The live Pi that holds the session: it commits the pending intent. */
  heldBy?: LeaseHolder | null;
  /** Every live Pi that holds the session, oldest hold first. */
  holders?: LeaseHolder[] | null;
}

export interface CommittedNotification {
  session: string;
  record: CommitRecord;
}

export function isDomainError(value: unknown): value is DomainError {
  return typeof value === 'object' && value !== null && 'error' in value &&
    typeof (value as DomainError).error === 'object' && (value as DomainError).error !== null;
}
