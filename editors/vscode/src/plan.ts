// The compaction plan: what a `fabric/compactionPreview` result means, in plain words,
// with the cut map of the branch (which entries are summarized and which are kept, with
// their JSONL lines) and the token budget. One model, two renderings: HTML for the
// webview (sidebar view and editor panel) and a valid Markdown document. Pure (no vscode
// import); the unit tests load it.
import type { PreviewResult, QaReport } from './protocol';
import { type EntryLine, branchOf } from './jsonl.ts';

export type RangeKind = 'earlier' | 'settings' | 'summarized' | 'kept';

export interface CutRange {
  kind: RangeKind;
  title: string;
  firstId: string;
  lastId: string;
  /** 0-based JSONL lines. */
  firstLine: number;
  lastLine: number;
  count: number;
  /** 1-based positions on the branch. */
  firstPos: number;
  lastPos: number;
}

export interface BudgetRow {
  label: string;
  tokens: number;
  note?: string;
}

export interface BarMark {
  label: string;
  tokens: number;
  kind: 'before' | 'after' | 'limit' | 'target';
}

export interface PlanModel {
  sessionId: string;
  sessionFile: string;
  outcome: string;
  sentence: string;
  branchLength: number;
  ranges: CutRange[];
  /** Where the model's current (live) window starts: after the last compaction, else the branch start. */
  liveStart?: { id: string; line: number; pos: number; afterCompaction: boolean };
  window?: number;
  rows: BudgetRow[];
  marks: BarMark[];
  limitNote?: string;
  qaLine: string;
  qaFailures: string[];
  summary?: string;
  instructions?: string;
  preserve?: string[];
}

const fmt = (n: number) => Math.round(n).toLocaleString('en-US');
const pct = (v: number) => `${(v * 100).toFixed(v >= 0.995 || v === 0 ? 0 : 1)} %`;
const num = (v: unknown): number | undefined => (typeof v === 'number' && Number.isFinite(v) ? v : undefined);

const TITLES: Record<RangeKind, string> = {
  earlier: 'Compacted earlier (the model sees its summary)',
  settings: 'Settings before the conversation (not summarized)',
  summarized: 'Summarized by this compaction',
  kept: 'Kept verbatim (the recent tail)',
};

function range(kind: RangeKind, branch: EntryLine[], a: number, b: number): CutRange | undefined {
  if (a < 0 || b < a || b >= branch.length) return undefined;
  const lines = branch.slice(a, b + 1).map((e) => e.line);
  return {
    kind, title: TITLES[kind], firstId: branch[a].id, lastId: branch[b].id,
    firstLine: Math.min(...lines), lastLine: Math.max(...lines), count: b - a + 1, firstPos: a + 1, lastPos: b + 1,
  };
}

/** Cut map of the branch the preview was computed on (`entries` from parseEntries). */
export function cutMap(r: PreviewResult, entries: EntryLine[]): Pick<PlanModel, 'ranges' | 'liveStart' | 'branchLength'> {
  const branch = branchOf(entries, r.leafId ?? undefined);
  const pos = new Map(branch.map((e, i) => [e.id, i]));
  let live = 0;
  let afterCompaction = false;
  for (let i = branch.length - 1; i >= 0; i -= 1) {
    const kept = branch[i].firstKeptEntryId;
    if (branch[i].type === 'compaction') {
      afterCompaction = true;
      live = kept && pos.has(kept) ? pos.get(kept)! : i + 1;
      break;
    }
  }
  const ranges: CutRange[] = [];
  const details = (r.details ?? {}) as { coverage?: { liveCutRange?: { first?: string; last?: string } } };
  const cut = details.coverage?.liveCutRange;
  const keptAt = r.firstKeptEntryId ? pos.get(r.firstKeptEntryId) : undefined;
  if (live > 0) {
    const earlier = range('earlier', branch, 0, live - 1);
    if (earlier) ranges.push(earlier);
  }
  if (r.outcome === 'compacted') {
    let a = cut?.first !== undefined ? pos.get(cut.first) : undefined;
    let b = cut?.last !== undefined ? pos.get(cut.last) : undefined;
    if (a === undefined) a = live;
    if (b === undefined) b = keptAt !== undefined ? keptAt - 1 : branch.length - 1;
    // Entries between the live start and the cut (model_change, thinking_level_change, …
    // before the first message) carry no conversation: the summary does not cover them.
    if (a > live) {
      const before = range('settings', branch, live, a - 1);
      if (before) {
        const types = [...new Set(branch.slice(live, a).map((e) => e.type))].join(', ');
        ranges.push({ ...before, title: `${TITLES.settings}: ${types}` });
      }
    }
    const summarized = range('summarized', branch, a, b);
    if (summarized) ranges.push(summarized);
    if (keptAt !== undefined) {
      const kept = range('kept', branch, keptAt, branch.length - 1);
      if (kept) ranges.push(kept);
    }
  } else if (live < branch.length) {
    const kept = range('kept', branch, live, branch.length - 1);
    if (kept) ranges.push({ ...kept, title: 'In the live window (nothing is summarized)' });
  }
  const liveStart = live < branch.length
    ? { id: branch[live].id, line: branch[live].line, pos: live + 1, afterCompaction }
    : undefined;
  return { ranges, liveStart, branchLength: branch.length };
}

const BINDING: Record<string, string> = {
  continuity: 'the target: the recent tail plus room for the summary',
  occupancy: 'the occupancy limit (a share of the window)',
  safe: 'the safe limit (90 % of the window minus the reply reserve)',
  reduction: 'the reduction limit (95 % of the tokens now)',
};

function budgetOf(r: PreviewResult): Pick<PlanModel, 'rows' | 'marks' | 'window' | 'limitNote'> {
  const b = ((r.details ?? {}) as { budget?: Record<string, unknown> }).budget ?? {};
  const rows: BudgetRow[] = [];
  const marks: BarMark[] = [];
  if (r.tokensBefore != null) {
    rows.push({ label: 'In context now (Pi\'s estimate)', tokens: r.tokensBefore });
    marks.push({ label: 'now', tokens: r.tokensBefore, kind: 'before' });
  }
  const window = num(b.contextWindow) || undefined;
  if (window) rows.push({ label: 'Model context window', tokens: window });
  const target = num(b.targetContextTokens) ?? num(b.continuityTargetTokens);
  if (target !== undefined) {
    rows.push({ label: 'Target after compaction', tokens: target, note: 'recent tail + room for the summary' });
    marks.push({ label: 'target', tokens: target, kind: 'target' });
  }
  const after = num(b.projectedTokensAfter);
  if (after !== undefined && r.outcome === 'compacted') {
    rows.push({ label: 'Projected after compaction', tokens: after });
    marks.push({ label: 'after', tokens: after, kind: 'after' });
  }
  const retained = num(b.retainedRawTokens);
  const keep = num(b.keepRecentTokens);
  if (retained !== undefined) {
    rows.push({ label: 'Recent tail kept verbatim', tokens: retained, note: keep !== undefined ? `up to ${fmt(keep)} (keepRecentTokens)` : undefined });
  }
  const reserve = num(b.reserveTokens);
  if (reserve !== undefined) rows.push({ label: 'Reserved for the model\'s reply', tokens: reserve });
  const ratio = num(b.targetContextRatio);
  const limits: [string, number | undefined][] = [
    [`${ratio !== undefined ? pct(ratio) : 'a share'} of the window`, num(b.occupancyCeilingTokens)],
    ['90 % of the window minus the reply reserve', num(b.safeCeilingTokens)],
    ['95 % of the tokens now', num(b.reductionCeilingTokens)],
  ];
  let limitNote: string | undefined;
  const known = limits.filter((l): l is [string, number] => l[1] !== undefined);
  if (known.length > 0) {
    const [label, tokens] = known.reduce((m, l) => (l[1] < m[1] ? l : m));
    rows.push({ label: 'Never more than', tokens, note: label });
    marks.push({ label: 'limit', tokens, kind: 'limit' });
    limitNote = `Limits: ${known.map(([l, t]) => `${l} = ${fmt(t)}`).join('; ')}.`;
  }
  const binding = typeof b.bindingConstraint === 'string' ? b.bindingConstraint : undefined;
  if (binding) limitNote = `${limitNote ? `${limitNote} ` : ''}What decided the cut: ${BINDING[binding] ?? binding}.`;
  return { rows, marks, window, limitNote };
}

const QA_CLASS: Record<string, string> = { content: 'fact', address: 'entry address' };
const EXPECTED = /^summary does not contain expected answer ("(?:[^"\\]|\\.)*")$/;

/**
 * One line per missed answer. The engine reports each probe (a fact and its entry address
 * are two probes of one answer) as `summary does not contain expected answer "<JSON>"`,
 * often of a quoted turn: shown once, unquoted, with what was checked.
 */
export function qaFailureLines(failures: unknown[]): string[] {
  const order: string[] = [];
  const checked = new Map<string, Set<string>>();
  for (const f of failures) {
    let text: string;
    let cls: string | undefined;
    if (typeof f === 'string') {
      text = f;
    } else {
      const o = (f ?? {}) as { reason?: unknown; class?: unknown };
      text = typeof o.reason === 'string' ? o.reason : JSON.stringify(f);
      cls = typeof o.class === 'string' ? o.class : undefined;
      const m = EXPECTED.exec(text);
      if (m) {
        try {
          let answer = JSON.parse(m[1]) as string;
          if (answer.length >= 2 && answer.startsWith('"') && answer.endsWith('"')) answer = answer.slice(1, -1);
          text = `Not in the summary: “${answer}”`;
        } catch {
          // Not JSON after all: shown as the engine wrote it.
        }
      }
    }
    if (!checked.has(text)) {
      checked.set(text, new Set());
      order.push(text);
    }
    if (cls) checked.get(text)!.add(QA_CLASS[cls] ?? cls);
  }
  return order.map((t) => {
    const c = [...checked.get(t)!];
    return c.length ? `${t} (${c.join(' and ')})` : t;
  });
}

function qaOf(qa: QaReport | null | undefined): Pick<PlanModel, 'qaLine' | 'qaFailures'> {
  if (!qa) return { qaLine: 'The QA check was not run.', qaFailures: [] };
  const probes = num((qa as unknown as { probes?: unknown }).probes);
  const line = `QA: ${pct(qa.score)} of ${probes !== undefined ? `${probes} ` : ''}questions about the summarized part are answered by the summary `
    + `(facts ${pct(qa.contentScore)}, entry addresses ${pct(qa.addressScore)}); ${qa.failures.length} missed.`;
  const failures = qaFailureLines(qa.failures);
  return { qaLine: line, qaFailures: failures };
}

function linesText(a: number, b: number): string {
  return a === b ? `line ${a + 1}` : `lines ${a + 1}–${b + 1}`;
}

export function planModel(r: PreviewResult, entries: EntryLine[], inputs: { instructions?: string; preserve?: string[] } = {}): PlanModel {
  const map = cutMap(r, entries);
  const budget = budgetOf(r);
  const summarized = map.ranges.find((x) => x.kind === 'summarized');
  const kept = map.ranges.find((x) => x.kind === 'kept');
  let sentence: string;
  if (r.outcome === 'compacted') {
    const after = budget.marks.find((m) => m.kind === 'after');
    const chars = r.summary ? `a ${fmt([...r.summary].length)}-character summary` : 'a summary';
    const what = summarized ? `${fmt(summarized.count)} entries (${linesText(summarized.firstLine, summarized.lastLine)})` : 'the older entries';
    const tail = kept ? ` and keep the last ${fmt(kept.count)} as they are` : ' and keep nothing verbatim';
    const tokens = after && r.tokensBefore != null ? `: about ${fmt(r.tokensBefore)} → ${fmt(after.tokens)} tokens${budget.window ? ` of a ${fmt(budget.window)}-token window` : ''}` : '';
    sentence = `Compacting now would replace ${what} with ${chars}${tail}${tokens}.`;
  } else if (r.outcome === 'skipped') {
    sentence = `Nothing would be compacted: ${r.reason ?? 'Pi would skip this session'}.`;
  } else {
    sentence = `Fabric would cancel this compaction: ${r.reason ?? 'no reason given'}.`;
  }
  sentence = sentence.replace(/\.\.$/, '.');
  return {
    sessionId: r.sessionId, sessionFile: r.sessionFile, outcome: r.outcome, sentence, ...map, ...budget, ...qaOf(r.qa),
    summary: r.summary ?? undefined, instructions: inputs.instructions, preserve: inputs.preserve,
  };
}

/** The question asked before a compaction request is sent (a modal: `message`, `detail`). */
export interface Confirmation {
  message: string;
  detail: string;
  /** The button that sends the request. */
  action: string;
}

/**
 * What a compaction of the session titled `title` would do, from a preview computed with
 * the settings the commit uses: the entries replaced, the tokens saved, and that it is
 * permanent. When the preview finds nothing to compact, it says why (the server refuses
 * such a request, or, after a compaction, waits for the next turn).
 */
export function confirmation(model: PlanModel, title: string, tokensBefore: number | null | undefined): Confirmation {
  const name = `“${title}”`;
  if (model.outcome !== 'compacted') {
    const why = model.sentence.replace(/^Nothing would be compacted: /, '').replace(/^Fabric would cancel this compaction: /, '');
    return {
      message: `Nothing to compact in ${name} now. Request a compaction anyway?`,
      detail: `The preview says: ${why}\n\nThe server refuses a request it cannot honour; after a compaction, the request waits for the next turn.`,
      action: 'Request Anyway',
    };
  }
  const summarized = model.ranges.find((x) => x.kind === 'summarized');
  const kept = model.ranges.find((x) => x.kind === 'kept');
  const after = model.marks.find((m) => m.kind === 'after')?.tokens;
  const what = summarized
    ? `${fmt(summarized.count)} entr${summarized.count === 1 ? 'y' : 'ies'} (${linesText(summarized.firstLine, summarized.lastLine)})`
    : 'the older entries';
  const keep = kept ? `, keeping the last ${fmt(kept.count)} as they are` : '';
  const saved = after !== undefined && tokensBefore != null
    ? ` About ${fmt(tokensBefore)} → ${fmt(after)} tokens in context: ${fmt(Math.max(0, tokensBefore - after))} tokens saved.`
    : '';
  return {
    message: `Compact ${name}?`,
    detail: `Replaces ${what} with a summary${keep}.${saved}\n\nThe compaction is appended to the session file when the session is settled (a live Pi commits it itself). It cannot be undone from the editor.`,
    action: 'Compact',
  };
}

/** A text bar of `width` cells: `tokens` of `max`. */
export function textBar(tokens: number, max: number, width = 24): string {
  const filled = max > 0 ? Math.max(0, Math.min(width, Math.round((tokens / max) * width))) : 0;
  return `${'█'.repeat(filled)}${'░'.repeat(width - filled)}`;
}

// ---------------------------------------------------------------- Markdown

/** Inline Markdown text: every character Markdown could read as syntax is escaped. */
export function escapeMarkdown(text: string): string {
  return text
    .replace(/\r?\n/g, ' ')
    .replace(/[\\`*_[\]<>#|~&]/g, '\\$&')
    // Block syntax only counts at the start of the text: list markers, numbered lists.
    .replace(/^([-+=])/, '\\$1')
    .replace(/^(\d+)([.)])/, '$1\\$2');
}

/** A fence longer than any backtick run in `text`, so the text is shown verbatim. */
export function fenceBlock(text: string, info = 'text'): string {
  let longest = 0;
  for (const run of text.match(/`+/g) ?? []) longest = Math.max(longest, run.length);
  const marks = '`'.repeat(Math.max(3, longest + 1));
  return `${marks}${info}\n${text}${text.endsWith('\n') ? '' : '\n'}${marks}`;
}

/**
 * A link to `line` of `file`. Markdown renderers refuse `file:` links (markdown-it's link
 * validation shows them as text), so a document written to disk links by a path relative
 * to its own directory `from` (the preview opens the JSONL at `#L<line>`); without `from`,
 * or across drives, a file URI.
 */
function fileLink(file: string, line: number, label: string, from?: string): string {
  const enc = (p: string) => encodeURI(p).replace(/[()#?]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
  let target: string | undefined;
  if (from !== undefined) {
    const rel = relativePath(from, file);
    if (rel !== undefined) target = rel.split('/').map(enc).join('/');
  }
  target ??= `file://${enc(file.replace(/\\/g, '/').replace(/^(?=[A-Za-z]:)/, '/'))}`;
  return `[${escapeMarkdown(label)}](<${target}#L${line + 1}>)`;
}

/** `to` relative to the directory `from` with `/` separators; undefined across drives. */
export function relativePath(from: string, to: string): string | undefined {
  const parts = (p: string) => p.replace(/\\/g, '/').split('/').filter((x, i) => x !== '' || i === 0);
  const a = parts(from);
  const b = parts(to);
  if ((a[0] ?? '').toLowerCase() !== (b[0] ?? '').toLowerCase()) return undefined;
  let i = 0;
  while (i < a.length && i < b.length && a[i] === b[i]) i += 1;
  return [...a.slice(i).map(() => '..'), ...b.slice(i)].join('/');
}

/** The plan as Markdown; `linkFrom`: the directory the document is written to (see fileLink). */
export function planMarkdown(m: PlanModel, linkFrom?: string): string {
  const out: string[] = [`# Compaction plan — ${escapeMarkdown(m.sessionId)}`, '', escapeMarkdown(m.sentence), ''];
  if (m.instructions) out.push(`Instructions: ${escapeMarkdown(m.instructions)}`, '');
  if (m.preserve?.length) out.push(`Preserve: ${m.preserve.length} item(s)`, '');
  out.push('## Cut map', '', `The branch has ${fmt(m.branchLength)} entries.`, '');
  for (const r of m.ranges) {
    out.push(`- **${escapeMarkdown(r.title)}**: ${fmt(r.count)} entries, ${fileLink(m.sessionFile, r.firstLine, `${r.firstId} (line ${r.firstLine + 1})`, linkFrom)}`
      + ` → ${fileLink(m.sessionFile, r.lastLine, `${r.lastId} (line ${r.lastLine + 1})`, linkFrom)}`);
  }
  if (m.ranges.length === 0) out.push('- (no entries on this branch)');
  if (m.liveStart) {
    out.push('', `The live window ${m.liveStart.afterCompaction ? 'starts after the last compaction, at' : 'starts at the beginning of the branch,'} `
      + `${fileLink(m.sessionFile, m.liveStart.line, `${m.liveStart.id} (line ${m.liveStart.line + 1})`, linkFrom)}.`);
  }
  out.push('', '## Budget', '');
  const max = Math.max(m.window ?? 0, ...m.rows.map((r) => r.tokens));
  out.push(fenceBlock(m.marks.map((k) => `${k.label.padEnd(7)}${textBar(k.tokens, max)} ${fmt(k.tokens)}`).join('\n'), 'text'), '');
  out.push('| | tokens | |', '| --- | ---: | --- |');
  for (const r of m.rows) out.push(`| ${escapeMarkdown(r.label)} | ${fmt(r.tokens)} | ${r.note ? escapeMarkdown(r.note) : ''} |`);
  if (m.limitNote) out.push('', escapeMarkdown(m.limitNote));
  out.push('', '## QA', '', escapeMarkdown(m.qaLine));
  if (m.qaFailures.length) {
    out.push('');
    for (const f of m.qaFailures.slice(0, 50)) out.push(`- ${escapeMarkdown(f)}`);
    if (m.qaFailures.length > 50) out.push(`- … ${m.qaFailures.length - 50} more`);
  }
  out.push('', '## Summary, exactly as committed', '');
  out.push(m.summary ? fenceBlock(m.summary, 'text') : `(no summary: ${escapeMarkdown(m.outcome)})`, '');
  return out.join('\n');
}

// ---------------------------------------------------------------- HTML (webview)

export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' }[c]!));
}

function lineLink(m: PlanModel, line: number, label: string): string {
  return `<a href="#" class="line" data-line="${line}" title="Open the JSONL at line ${line + 1}">${escapeHtml(label)}</a>`;
}

/** The body of the plan (no <html>/<head>): the webview wraps it with its CSP and script. */
export function planHtmlBody(m: PlanModel): string {
  const h: string[] = [];
  h.push(`<h2>Compaction plan <span class="id">${escapeHtml(m.sessionId.slice(0, 8))}</span></h2>`);
  h.push(`<p class="sentence outcome-${escapeHtml(m.outcome)}">${escapeHtml(m.sentence)}</p>`);
  h.push('<div class="actions"><button data-action="openJsonl">Open JSONL</button>'
    + '<button data-action="markdown">Open as Markdown</button>'
    + '<button data-action="request">Request compaction…</button>'
    + '<button data-action="refresh">Refresh</button></div>');
  if (m.instructions) h.push(`<p class="note">Instructions: ${escapeHtml(m.instructions)}</p>`);
  if (m.preserve?.length) h.push(`<p class="note">Preserve: ${m.preserve.length} item(s)</p>`);
  h.push(`<details open class="cutmap"><summary>Cut map <span class="muted">· ${fmt(m.branchLength)} entries on the branch</span></summary>`);
  if (m.branchLength > 0) {
    h.push('<div class="strip">');
    for (const r of m.ranges) {
      const w = Math.max(1, (r.count / m.branchLength) * 100);
      h.push(`<span class="seg ${r.kind}" style="width:${w.toFixed(2)}%" title="${escapeHtml(`${r.title}: ${r.count} entries`)}"></span>`);
    }
    h.push('</div>');
  }
  h.push('<ul class="ranges">');
  for (const r of m.ranges) {
    h.push(`<li class="${r.kind}"><span class="swatch ${r.kind}"></span><b>${escapeHtml(r.title)}</b><br>`
      + `${fmt(r.count)} entries: ${lineLink(m, r.firstLine, `${r.firstId} · line ${r.firstLine + 1}`)} → ${lineLink(m, r.lastLine, `${r.lastId} · line ${r.lastLine + 1}`)}</li>`);
  }
  h.push('</ul>');
  if (m.liveStart) {
    h.push(`<p class="live">Live window starts ${m.liveStart.afterCompaction ? 'after the last compaction' : 'at the start of the branch'}: `
      + `${lineLink(m, m.liveStart.line, `${m.liveStart.id} · line ${m.liveStart.line + 1}`)}</p>`);
  }
  h.push('</details>');
  h.push('<details open class="budget"><summary>Budget</summary>');
  const max = Math.max(m.window ?? 0, ...m.rows.map((r) => r.tokens), 1);
  h.push('<div class="bar">');
  for (const k of m.marks) {
    if (k.kind === 'before' || k.kind === 'after') {
      h.push(`<div class="fill ${k.kind}" style="width:${((k.tokens / max) * 100).toFixed(2)}%"></div>`);
    }
  }
  for (const k of m.marks) {
    if (k.kind === 'limit' || k.kind === 'target') {
      h.push(`<div class="tick ${k.kind}" style="left:${((k.tokens / max) * 100).toFixed(2)}%" title="${escapeHtml(`${k.label}: ${fmt(k.tokens)}`)}"></div>`);
    }
  }
  h.push('</div><div class="legend">'
    + m.marks.map((k) => `<span class="key ${k.kind}"></span>${escapeHtml(k.label)} ${fmt(k.tokens)}`).join(' &nbsp; ')
    + (m.window ? ` &nbsp; of ${fmt(m.window)}` : '') + '</div>');
  h.push('<table>');
  for (const r of m.rows) {
    h.push(`<tr><td>${escapeHtml(r.label)}</td><td class="n">${fmt(r.tokens)}</td><td class="muted">${r.note ? escapeHtml(r.note) : ''}</td></tr>`);
  }
  h.push('</table>');
  if (m.limitNote) h.push(`<p class="muted">${escapeHtml(m.limitNote)}</p>`);
  h.push('</details>');
  h.push(`<details open class="qa"><summary>QA</summary><p>${escapeHtml(m.qaLine)}</p>`);
  if (m.qaFailures.length) {
    h.push('<ul class="failures">');
    for (const f of m.qaFailures.slice(0, 50)) h.push(`<li>${escapeHtml(f)}</li>`);
    h.push('</ul>');
  }
  h.push('</details>');
  h.push('<details open class="summary"><summary>Summary, exactly as committed</summary>');
  h.push(m.summary ? `<pre><code>${escapeHtml(m.summary)}</code></pre>` : `<p class="muted">(no summary: ${escapeHtml(m.outcome)})</p>`);
  h.push('</details>');
  return h.join('\n');
}

export const PLAN_CSS = `
body { font-family: var(--vscode-font-family); font-size: var(--vscode-font-size); color: var(--vscode-foreground); padding: 0 10px 16px; }
h2 { font-size: 1.15em; margin: 10px 0 6px; } .id { color: var(--vscode-descriptionForeground); font-weight: normal; }
.sentence { font-size: 1.05em; line-height: 1.45; margin: 6px 0 10px; }
.outcome-skipped, .outcome-cancelled { color: var(--vscode-descriptionForeground); }
.actions button { margin: 0 6px 6px 0; color: var(--vscode-button-secondaryForeground); background: var(--vscode-button-secondaryBackground); border: none; padding: 3px 8px; border-radius: 2px; cursor: pointer; }
details { margin: 8px 0; } summary { font-weight: 600; cursor: pointer; margin-bottom: 6px; }
.muted, .note { color: var(--vscode-descriptionForeground); }
.stale { padding: 6px 8px; border-left: 3px solid var(--vscode-editorWarning-foreground); background: var(--vscode-inputValidation-warningBackground); }
.strip { display: flex; height: 12px; border-radius: 3px; overflow: hidden; margin: 4px 0 8px; background: var(--vscode-editorWidget-background); }
.seg.earlier, .swatch.earlier { background: #8a8a8a; } .seg.settings, .swatch.settings { background: #b4b4b4; } .seg.summarized, .swatch.summarized { background: #d19a2e; } .seg.kept, .swatch.kept { background: #3b8eea; }
.swatch { display: inline-block; width: 10px; height: 10px; border-radius: 2px; margin-right: 6px; }
ul.ranges { list-style: none; padding-left: 0; margin: 0; } ul.ranges li { margin: 0 0 6px; line-height: 1.4; }
a.line { color: var(--vscode-textLink-foreground); text-decoration: none; } a.line:hover { text-decoration: underline; }
.bar { position: relative; height: 14px; background: var(--vscode-editorWidget-background); border: 1px solid var(--vscode-widget-border, transparent); border-radius: 3px; margin: 6px 0 4px; }
.fill { position: absolute; top: 0; bottom: 0; left: 0; } .fill.before { background: rgba(209,154,46,.45); } .fill.after { background: #3b8eea; }
.tick { position: absolute; top: -3px; bottom: -3px; width: 2px; } .tick.limit { background: #c74e39; } .tick.target { background: #388a34; }
.legend { font-size: .9em; color: var(--vscode-descriptionForeground); margin-bottom: 6px; }
.key { display: inline-block; width: 9px; height: 9px; margin-right: 4px; border-radius: 2px; }
.key.before { background: rgba(209,154,46,.6); } .key.after { background: #3b8eea; } .key.limit { background: #c74e39; } .key.target { background: #388a34; }
table { border-collapse: collapse; margin: 4px 0; } td { padding: 2px 8px 2px 0; vertical-align: top; } td.n { text-align: right; font-variant-numeric: tabular-nums; }
pre { white-space: pre-wrap; word-break: break-word; background: var(--vscode-textCodeBlock-background); padding: 8px; border-radius: 3px; font-family: var(--vscode-editor-font-family); font-size: var(--vscode-editor-font-size); }
ul.failures { padding-left: 18px; } ul.failures li { margin-bottom: 3px; }
`;
