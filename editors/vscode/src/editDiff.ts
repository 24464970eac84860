// The before/after text of a Pi `edit` or `write` tool call, read from its session JSONL
// line, for a diff editor. Pure (no vscode import), so the unit tests load this file directly.
//
// Pi 0.80.6 `edit`: {path, oldText, newText}; Pi 1.x `edit`: {path, edits: [{oldText, newText}]};
// `write`: {path, content}. Several replacements of one call are shown one after another,
// separated by a marker line, on both sides.

export interface EditTexts {
  before: string;
  after: string;
  tool: string;
}

const SEPARATOR = (n: number, of: number) => `\n⋯ replacement ${n + 1} of ${of} ⋯\n`;

function str(v: unknown): string | undefined {
  return typeof v === 'string' ? v : undefined;
}

/**
 * The texts of the tool call `toolCallId` (or, without one, the first edit/write call) of
 * the assistant entry on `line` (one JSONL line). undefined when the line holds no such call.
 */
export function editTexts(line: string, toolCallId?: string | null): EditTexts | undefined {
  let entry: unknown;
  try {
    entry = JSON.parse(line);
  } catch {
    return undefined;
  }
  const content = (entry as { message?: { content?: unknown } })?.message?.content;
  if (!Array.isArray(content)) return undefined;
  const calls = content.filter((c): c is { type: string; id?: string; name?: string; arguments?: Record<string, unknown> } =>
    c !== null && typeof c === 'object' && (c as { type?: unknown }).type === 'toolCall');
  const call = toolCallId
    ? calls.find((c) => c.id === toolCallId)
    : calls.find((c) => c.name === 'edit' || c.name === 'write');
  if (!call || !call.arguments || typeof call.arguments !== 'object') return undefined;
  const args = call.arguments;
  if (call.name === 'write') {
    const text = str(args.content);
    return text === undefined ? undefined : { before: '', after: text, tool: 'write' };
  }
  if (call.name !== 'edit') return undefined;
  const pairs: { oldText: string; newText: string }[] = [];
  if (Array.isArray(args.edits)) {
    for (const e of args.edits) {
      const o = str((e as { oldText?: unknown })?.oldText);
      const n = str((e as { newText?: unknown })?.newText);
      if (o !== undefined && n !== undefined) pairs.push({ oldText: o, newText: n });
    }
  } else {
    const o = str(args.oldText);
    const n = str(args.newText);
    if (o !== undefined && n !== undefined) pairs.push({ oldText: o, newText: n });
  }
  if (pairs.length === 0) return undefined;
  if (pairs.length === 1) return { before: pairs[0].oldText, after: pairs[0].newText, tool: 'edit' };
  return {
    before: pairs.map((p, i) => `${SEPARATOR(i, pairs.length)}${p.oldText}`).join('\n'),
    after: pairs.map((p, i) => `${SEPARATOR(i, pairs.length)}${p.newText}`).join('\n'),
    tool: 'edit',
  };
}

/** Line `n` (0-based) of `text` ('' past the end). */
export function lineAt(text: string, n: number): string {
  let start = 0;
  for (let i = 0; i < n; i += 1) {
    const next = text.indexOf('\n', start);
    if (next < 0) return '';
    start = next + 1;
  }
  const end = text.indexOf('\n', start);
  return text.slice(start, end < 0 ? undefined : end);
}
