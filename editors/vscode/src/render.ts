// Markdown renderings of server results for the read-only virtual documents.
// Pure functions (no vscode import) so the same text is produced everywhere.
import type {
  CommitRecord, ExpandResult, ExpandedEntry, PreviewResult, QaReport, StatusResult,
} from './protocol';

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
    `- index ${e.index}, line ${e.line + 1}`,
  ].filter((l): l is string => l !== undefined);
  return [`## ${roleLabel(e)} · ${formatTime(e.timestamp) || 'no time'}`, '', ...meta, '', fence(e.text, 'text'), ''].join('\n');
}

export function renderExpand(result: ExpandResult): string {
  const lines = [
    `# Session ${result.sessionId}`,
    '',
    `- file: \`${result.sessionFile}\``,
    `- branches: ${result.branches}`,
    `- source hash: \`${result.sourceHash}\``,
    `- entries: ${result.expanded.length}`,
    '',
  ];
  for (const e of result.expanded) lines.push(entrySection(result.sessionId, e));
  return lines.join('\n');
}

function num(value: unknown): string {
  return typeof value === 'number' && Number.isFinite(value) ? value.toLocaleString('en-US') : '—';
}

function renderQa(qa: QaReport | null | undefined): string[] {
  if (!qa) return ['QA was not run.'];
  const pct = (v: number) => `${(v * 100).toFixed(1)}%`;
  const out = [
    `| score | content | addresses | failures |`,
    `| ---: | ---: | ---: | ---: |`,
    `| ${pct(qa.score)} | ${pct(qa.contentScore)} | ${pct(qa.addressScore)} | ${qa.failures.length} |`,
  ];
  if (qa.failures.length > 0) {
    out.push('', 'Failed probes:', '');
    for (const f of qa.failures.slice(0, 50)) {
      const text = typeof f === 'string' ? f : JSON.stringify(f);
      out.push(`- ${text.replace(/\n/g, ' ')}`);
    }
    if (qa.failures.length > 50) out.push(`- … ${qa.failures.length - 50} more`);
  }
  return out;
}

const BUDGET_ROWS: [string, string][] = [
  ['contextWindow', 'context window'],
  ['targetContextRatio', 'target context ratio'],
  ['targetContextTokens', 'target context tokens'],
  ['reserveTokens', 'reserve tokens'],
  ['keepRecentTokens', 'keep recent tokens'],
  ['rawTokensBefore', 'raw tokens before'],
  ['retainedRawTokens', 'retained raw tokens'],
  ['continuityTargetTokens', 'continuity target'],
  ['occupancyCeilingTokens', 'ceiling: occupancy'],
  ['safeCeilingTokens', 'ceiling: safe window'],
  ['reductionCeilingTokens', 'ceiling: reduction'],
  ['rawTailTokenBudget', 'raw tail budget'],
  ['projectedTokensAfter', 'projected tokens after'],
];

export interface PreviewInputs {
  instructions?: string;
  preserve?: string[];
}

export function renderPreview(r: PreviewResult, inputs: PreviewInputs = {}): string {
  const details = (r.details ?? {}) as Record<string, unknown>;
  const budget = (details.budget ?? null) as Record<string, unknown> | null;
  const coverage = (details.coverage ?? null) as { liveCutRange?: { first?: string; last?: string } } | null;
  const lines = [
    `# Compaction preview — ${r.sessionId}`,
    '',
    `- outcome: **${r.outcome}**${r.reason ? ` (${r.reason})` : ''}`,
    `- session file: \`${r.sessionFile}\``,
    `- leaf: ${r.leafId ? entryRef(r.sessionId, r.leafId) : '—'}`,
    `- source hash: \`${r.sourceHash}\``,
  ];
  if (inputs.instructions) lines.push(`- instructions: ${snippet(inputs.instructions, 200)}`);
  if (inputs.preserve && inputs.preserve.length > 0) lines.push(`- preserve: ${inputs.preserve.length} item(s)`);
  lines.push('', '## Cut point', '');
  if (r.firstKeptEntryId) {
    lines.push(`First kept entry: ${entryRef(r.sessionId, r.firstKeptEntryId)}`);
    const cut = coverage?.liveCutRange;
    if (cut?.first && cut?.last) {
      lines.push('', `Summarized: ${entryRef(r.sessionId, cut.first)} → ${entryRef(r.sessionId, cut.last)}`);
    }
  } else {
    lines.push('No cut point (nothing is compacted).');
  }
  lines.push('', '## Token budget', '', '| | tokens |', '| --- | ---: |', `| before | ${num(r.tokensBefore)} |`);
  if (budget) {
    for (const [key, label] of BUDGET_ROWS) {
      if (key in budget) {
        const v = budget[key];
        lines.push(`| ${label} | ${key === 'targetContextRatio' && typeof v === 'number' ? v.toFixed(2) : num(v)} |`);
      }
    }
    if (typeof budget.bindingConstraint === 'string') lines.push('', `Binding constraint: ${budget.bindingConstraint}`);
  }
  lines.push('', '## QA', '', ...renderQa(r.qa));
  lines.push('', '## Summary', '');
  lines.push(r.summary ? fence(r.summary, 'text') : '(no summary)');
  lines.push('');
  return lines.join('\n');
}

export function describeRecord(rec: CommitRecord): string {
  if (rec.status === 'failed') return `failed at ${formatTime(rec.at)}: ${rec.error ?? 'unknown error'}`;
  const tokens = rec.tokensBefore != null
    ? ` (${num(rec.tokensBefore)} → ~${num(rec.estimatedTokensAfter)} tokens)`
    : '';
  return `committed at ${formatTime(rec.at)}${tokens}`;
}

export function describeStatus(s: StatusResult): string {
  const parts: string[] = [];
  if (s.pending) {
    parts.push(`pending since ${formatTime(s.pending.requestedAt)} (requested by ${s.pending.requestedBy})`);
  } else {
    parts.push('nothing pending');
  }
  parts.push(s.settled ? 'session settled' : 'session busy');
  if (s.last) parts.push(`last: ${describeRecord(s.last)}`);
  return parts.join('; ');
}
