// The text of the current-session status bar item. Pure (no vscode import); unit-tested.
import type { StatusResult } from './protocol';
import { formatTime } from './render.ts';

export function compactTokens(n: number): string {
  if (n >= 1_000_000) return `${(n / 1_000_000).toFixed(1)}M`;
  if (n >= 1000) return `${Math.round(n / 1000)}k`;
  return String(n);
}

/** The status bar text of a session (pure, for tests). */
export function sessionStatusText(tokens: { before: number | null; window?: number } | undefined, st: StatusResult | undefined): { text: string; tooltip: string } {
  const parts: string[] = [];
  const tips: string[] = [];
  if (tokens && tokens.before != null) {  // null: the session's usage is not a finite number
    parts.push(tokens.window ? `${compactTokens(tokens.before)}/${compactTokens(tokens.window)}` : compactTokens(tokens.before));
    tips.push(`${tokens.before.toLocaleString('en-US')} tokens in context${tokens.window ? ` of a ${tokens.window.toLocaleString('en-US')}-token window` : ''}`);
  }
  if (st?.pending) {
    parts.push('pending');
    tips.push(`compaction requested ${formatTime(st.pending.requestedAt)} by ${st.pending.requestedBy}`);
  }
  if (st?.last) {
    parts.push(`last ${formatTime(st.last.at).slice(11, 16)}`);
    tips.push(`last compaction ${st.last.status} at ${formatTime(st.last.at)}${st.last.committedBy === 'pi' ? ' by Pi' : ''}`);
  }
  if (st?.heldBy) {
    parts.push('live Pi');
    tips.push(`held by a live Pi (pid ${st.heldBy.pid}): Pi commits compactions`);
  }
  return { text: `$(layers) ${parts.join(' · ') || 'Fabric'}`, tooltip: `${tips.join('\n') || 'Fabric session'}\nClick for the compaction plan.` };
}

