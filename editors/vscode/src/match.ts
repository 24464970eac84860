// Where a recall query matches an entry's text, and a one-line snippet centred on the first
// match with the matched spans marked. Pure (no vscode import); the unit tests load it.
//
// Literal queries use the server's lexical rule (engine/memory/tokenize.py): terms are the
// maximal runs of letters, numbers and `_`, compared case-insensitively after NFKC. A regex
// query is applied to the text as a JavaScript regex (close to the server's for the usual
// patterns); a pattern JavaScript cannot compile matches nothing here.

export interface Span {
  /** UTF-16 offsets into the text, end exclusive. */
  start: number;
  end: number;
}

const WORD = /[\p{L}\p{N}_]+/gu;

/** The query's terms as the server's tokenizer sees them (lowercased, NFKC). */
export function queryTerms(query: string): string[] {
  const out = new Set<string>();
  for (const m of query.normalize('NFKC').matchAll(WORD)) out.add(m[0].toLowerCase());
  return [...out];
}

function regexOf(pattern: string): RegExp | undefined {
  for (const flags of ['giu', 'gi']) {
    try {
      return new RegExp(pattern, flags);
    } catch {
      // try the next flag set
    }
  }
  return undefined;
}

/** Spans of `text` that the query matches, in order, not overlapping. */
export function matchSpans(text: string, query: string, mode: 'literal' | 'regex' = 'literal'): Span[] {
  const spans: Span[] = [];
  if (!query) return spans;
  if (mode === 'regex') {
    const re = regexOf(query);
    if (!re) return spans;
    for (const m of text.matchAll(re)) {
      const start = m.index ?? 0;
      if (m[0].length === 0) continue;
      spans.push({ start, end: start + m[0].length });
      if (spans.length >= 1000) break;
    }
    return spans;
  }
  const terms = new Set(queryTerms(query));
  if (terms.size === 0) return spans;
  for (const m of text.matchAll(WORD)) {
    const word = m[0];
    const norm = /^[\x00-\x7f]*$/.test(word) ? word.toLowerCase() : word.normalize('NFKC').toLowerCase();
    if (terms.has(norm)) spans.push({ start: m.index ?? 0, end: (m.index ?? 0) + word.length });
  }
  return spans;
}

export interface Snippet {
  text: string;
  /** Spans of `text` (the snippet) to highlight. */
  highlights: Span[];
  /** Whether the snippet shows a match (false: no match found, the text's start is shown). */
  matched: boolean;
}

/** Whitespace runs collapsed to one space; `map[i]` is the source offset of output char i. */
function flatten(text: string): { flat: string; map: number[] } {
  let flat = '';
  const map: number[] = [];
  let space = false;
  for (let i = 0; i < text.length; i += 1) {
    const c = text[i];
    if (c === ' ' || c === '\n' || c === '\t' || c === '\r' || c === '\f' || c === '\v') {
      if (!space && flat.length > 0) {
        flat += ' ';
        map.push(i);
      }
      space = true;
    } else {
      flat += c;
      map.push(i);
      space = false;
    }
  }
  if (flat.endsWith(' ')) {
    flat = flat.slice(0, -1);
    map.pop();
  }
  return { flat, map };
}

function isLowSurrogate(s: string, i: number): boolean {
  const c = s.charCodeAt(i);
  return c >= 0xdc00 && c <= 0xdfff;
}

/**
 * One line of at most `width` UTF-16 units, whitespace collapsed, centred on the first
 * match (`lead` characters before it, a third of the width by default), with every match inside it highlighted.
 * Never splits a surrogate pair; `…` marks cut ends.
 */
export function centredSnippet(text: string, spans: Span[], width = 120, lead = Math.floor(width / 3)): Snippet {
  const { flat, map } = flatten(text);
  // Source offset → flat offset of each span (spans inside collapsed whitespace vanish).
  const inv = new Map<number, number>();
  map.forEach((src, i) => inv.set(src, i));
  const flatSpans: Span[] = [];
  for (const s of spans) {
    let a = -1;
    for (let i = s.start; i < s.end && a < 0; i += 1) if (inv.has(i)) a = inv.get(i)!;
    let b = -1;
    for (let i = s.end - 1; i >= s.start && b < 0; i -= 1) if (inv.has(i)) b = inv.get(i)! + 1;
    if (a >= 0 && b > a) flatSpans.push({ start: a, end: b });
  }
  const matched = flatSpans.length > 0;
  let start = 0;
  if (matched && flat.length > width) {
    const first = flatSpans[0];
    start = Math.max(0, Math.min(first.start - lead, flat.length - width + 1));
    // Start at a word boundary when one is close, so the snippet does not open mid-word.
    const space = flat.lastIndexOf(' ', first.start - 1);
    if (space >= start && space - start < Math.min(15, lead / 2)) start = space + 1;
  }
  if (start > 0 && isLowSurrogate(flat, start)) start += 1;
  const prefix = start > 0 ? '…' : '';
  let end = Math.min(flat.length, start + width - prefix.length);
  const suffix = end < flat.length ? '…' : '';
  if (suffix) end -= 1;
  if (end < flat.length && end > start && isLowSurrogate(flat, end)) end -= 1;
  const body = flat.slice(start, end);
  const highlights: Span[] = [];
  for (const s of flatSpans) {
    const a = Math.max(s.start, start);
    const b = Math.min(s.end, end);
    if (b > a) highlights.push({ start: a - start + prefix.length, end: b - start + prefix.length });
  }
  return { text: `${prefix}${body}${suffix}`, highlights, matched };
}

/**
 * The snippet of `text` for `query`. `lead`: characters of context before the first match
 * (a narrow sidebar shows only the start of a row, so the tree keeps it short).
 */
export function snippetFor(text: string, query: string, mode: 'literal' | 'regex' = 'literal', width = 120, lead?: number): Snippet {
  return centredSnippet(text, matchSpans(text, query, mode), width, lead);
}

/** 0-based (line, character) of a UTF-16 offset in `text`. */
export function positionAt(text: string, offset: number): { line: number; character: number } {
  let line = 0;
  let lineStart = 0;
  for (let i = 0; i < offset && i < text.length; i += 1) {
    if (text.charCodeAt(i) === 10) {
      line += 1;
      lineStart = i + 1;
    }
  }
  return { line, character: offset - lineStart };
}

/** Why `pattern` is not a regular expression the search can run (JavaScript's own
 *  reading, case-insensitive, Unicode), or undefined when it is one. */
export function regexProblem(pattern: string): string | undefined {
  try {
    new RegExp(pattern, 'iu');
    return undefined;
  } catch (err) {
    return `Not a valid regular expression: ${err instanceof Error ? err.message.replace(/^Invalid regular expression: /, '') : String(err)}`;
  }
}
