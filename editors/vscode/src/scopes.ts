// Recall scopes as the user chooses them (Results view, Recall… picker). Pure: no vscode
// import, unit-tested directly.

export type Scope = 'session' | 'project' | 'global' | 'team';

/** The scope after `scope` when the scope button is pressed: session → project → global
 * (→ team, when a team database is configured) → session. */
export function nextScope(scope: Scope, team: boolean): Scope {
  const order: Scope[] = team ? ['session', 'project', 'global', 'team'] : ['session', 'project', 'global'];
  const at = order.indexOf(scope);
  return order[(at + 1) % order.length];
}

/** The scope button's tooltip. */
export function scopeTooltip(team: boolean): string {
  return `Switch scope (session → project → global${team ? ' → team' : ''})`;
}

/** Who pushed a team item, and from where: "alice@laptop (machine build-02)". */
export function teamLabel(member: string | null | undefined, machine: string | null | undefined): string {
  if (!member) return '';
  return machine ? `${member} (machine ${machine})` : member;
}

/** Whether the user set a team database (`fabric.team.url`, the value passed in): then the
 * scope button offers the team scope too ("Fabric: Recall in the Team…" and the scope list
 * offer it always). */
export function teamConfigured(url: unknown): boolean {
  return typeof url === 'string' && url.trim() !== '';
}

/** A `team: <member>` scope's description in the scope list, from `fabric/teamMembers`:
 * "12 sessions · 340 entries · laptop, build-02". */
export function memberDescription(m: { sessions: number; entries: number; machines: string[] }): string {
  const sessions = `${m.sessions} session${m.sessions === 1 ? '' : 's'}`;
  const entries = `${m.entries} entr${m.entries === 1 ? 'y' : 'ies'}`;
  return [sessions, entries, m.machines.join(', ')].filter((s) => s !== '').join(' · ');
}
