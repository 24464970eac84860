// The "Recall results" view of the Fabric sidebar: it stays open like the Search view.
// Session → matching entries, each a snippet centred on its first match with the matched
// terms highlighted; counts in the view's description, coverage as a one-line message;
// next / previous match; scope and mode toggles; refresh; more pages on demand.
import * as vscode from 'vscode';
import { errorLine, explainError, reasonText } from './errors';
import { LatestOnly } from './latest';
import { Fabric, errorMessage, teamOn } from './fabric';
import { Method, Pointer, RecallResult, Segment, SegmentEntry, TeamMembersResult } from './protocol';
import { type SessionName, fileNote, formatTime, roleLabel, sessionNames, shortId } from './render';
import { matchSpans, regexProblem, snippetFor } from './match';
import { activeSession } from './sessions';
import { expandAndShow, openJsonlAt } from './expand';
import { Scope, memberDescription, nextScope, scopeTooltip, teamLabel } from './scopes';

export type { Scope } from './scopes';
export type Mode = 'literal' | 'regex';

type Node =
  | { kind: 'session'; sessionId: string; sessionFile: string; cold: boolean; entries: EntryNode[]; pointer?: Pointer; member?: string; machine?: string }
  | EntryNode
  | { kind: 'more' }
  | { kind: 'note'; text: string };

interface EntryNode {
  kind: 'entry';
  parent?: Node;
  segment: Segment;
  entry: SegmentEntry;
  position: number;
}

const ROLE_ICON: Record<string, string> = { user: 'account', assistant: 'hubot', toolResult: 'output', bashExecution: 'terminal' };

/** A calm one-line note about coverage ('' when complete); an error says what to do. */
export function coverageNote(result: RecallResult): string {
  const c = result.coverage;
  if (c.error) return errorLine(explainError(c.error, { pattern: result.queryMode === 'regex' ? result.query : undefined }));
  if (c.complete) return '';
  const why = c.reasons.map(reasonText).join('; ');
  return `${c.indexedSessions} of ${c.eligibleSessions} sessions searched${why ? ` — ${why}` : ''}.`;
}

/** A match's identity across answers: its member (team), session file and entry. */
function matchKey(node: EntryNode): string {
  return `${node.segment.member ?? ''}#${node.segment.sessionFile}#${node.entry.entryId ?? `@${node.entry.index}`}`;
}

export class RecallView implements vscode.TreeDataProvider<Node>, vscode.Disposable {
  private readonly changed = new vscode.EventEmitter<Node | undefined>();
  readonly onDidChangeTreeData = this.changed.event;
  readonly view: vscode.TreeView<Node>;
  query = '';
  mode: Mode = 'literal';
  scope: Scope;
  /** A session the search is narrowed to (a cold pointer, or "Recall in this session"). */
  sessionScope: string | undefined;
  /** With the team scope: one member's sessions alone ("team:<member>", docs/team.md). */
  teamMember: string | undefined;
  /** Members seen in team answers of this window (the scope list offers each). */
  private readonly members = new Set<string>();
  private results: RecallResult[] = [];
  private roots: Node[] = [];
  /** What each listed session is called (`sessionNames`: prefixes no other listed id shares). */
  private names = new Map<string, SessionName>();
  private flat: EntryNode[] = [];
  private current = -1;
  /** The current match across a refresh (its pages arrive one by one). */
  private keep: string | undefined;
  private running: vscode.CancellationTokenSource | undefined;
  private readonly highlight: vscode.TextEditorDecorationType;
  private readonly stateChanged = new vscode.EventEmitter<void>();
  /** Fired whenever the query, scope, mode, answer or live message changes (the Recall
   *  Search box shows them). */
  readonly onDidChangeState = this.stateChanged.event;
  /** What the search box shows under the query: the regex check's or the server's error
   *  for what was typed last, else nothing. */
  liveMessage: string | undefined;
  private live: LatestOnly<string> | undefined;

  constructor(private readonly fabric: Fabric) {
    this.scope = vscode.workspace.getConfiguration('fabric').get<Scope>('recall.scope') ?? 'project';
    this.view = vscode.window.createTreeView('fabric.recall', { treeDataProvider: this, showCollapseAll: true });
    this.highlight = vscode.window.createTextEditorDecorationType({
      backgroundColor: new vscode.ThemeColor('editor.findMatchHighlightBackground'),
      borderColor: new vscode.ThemeColor('editor.findMatchBorder'),
      borderStyle: 'solid',
      borderWidth: '1px',
      overviewRulerColor: new vscode.ThemeColor('editorOverviewRuler.findMatchForeground'),
      overviewRulerLane: vscode.OverviewRulerLane.Center,
    });
    void this.setContext();
    this.updateTitle();
  }

  private async setContext(): Promise<void> {
    await vscode.commands.executeCommand('setContext', 'fabricLsp.recallHasResults', this.flat.length > 0);
    await vscode.commands.executeCommand('setContext', 'fabricLsp.recallRegex', this.mode === 'regex');
  }

  private scopeParam(): string {
    if (this.sessionScope) return `session:${this.sessionScope}`;
    if (this.scope === 'session') {
      const active = activeSession();
      return active ? `session:${active.session}` : 'project';
    }
    if (this.scope === 'team' && this.teamMember) return `team:${this.teamMember}`;
    return this.scope;
  }

  scopeLabel(): string {
    if (this.sessionScope) return `session ${shortId(this.sessionScope.split(/[\\/]/).pop() ?? this.sessionScope)}`;
    if (this.scope === 'team' && this.teamMember) return `team ${this.teamMember}`;
    return this.scope;
  }

  private updateTitle(): void {
    const total = this.results[0];
    const parts: string[] = [];
    if (this.query) parts.push(`“${this.query}”${this.mode === 'regex' ? ' (regex)' : ''}`);
    parts.push(this.scopeLabel());
    if (total) {
      const sessions = this.roots.filter((r) => r.kind === 'session').length;
      parts.push(`${total.totalMatches} match${total.totalMatches === 1 ? '' : 'es'} in ${sessions} session${sessions === 1 ? '' : 's'}`);
    }
    this.view.description = parts.join(' · ');
    const note = total ? coverageNote(total) : '';
    this.view.message = !this.query
      ? 'Search past Pi sessions: type in the Recall Search box above, or use “Fabric: Recall…”.'
      : note || undefined;
    this.stateChanged.fire();
  }

  /** The Recall Search box's keystroke (`input`: debounced) or Enter (`now`): the query
   *  checked as it is typed, searched into this view, the search in flight cancelled; the
   *  server's error for the latest query becomes `liveMessage`. */
  typed(query: string, how: 'input' | 'now'): void {
    const problem = this.mode === 'regex' && query ? regexProblem(query) : undefined;
    if (problem !== this.liveMessage) {
      this.liveMessage = problem;
      this.stateChanged.fire();
    }
    if (problem) {
      // What the box holds now cannot be searched: a search started before (the mode
      // switch's, an earlier keystroke's) must not answer for it and clear the problem.
      this.live?.cancel();
      return;
    }
    const live = this.live ?? new LatestOnly<string>(vscode.workspace.getConfiguration('fabric').get<number>('recall.debounceMs') ?? 200, (q, seq) => {
      void this.search(q).then(() => {
        if (!live.isLatest(seq)) return;
        this.liveMessage = this.answerError(q);
        this.stateChanged.fire();
      });
      return { cancel: () => this.running?.cancel() };
    });
    this.live = live;
    if (how === 'now') live.now(query);
    else live.input(query);
  }

  /** The server's error for the answer shown to `query`, as one line for the user. */
  private answerError(query: string): string | undefined {
    const error = this.results[0]?.coverage.error;
    return error ? errorLine(explainError(error, { pattern: this.mode === 'regex' ? query : undefined })) : undefined;
  }

  /** The scopes the search box offers: `[value, label]`, value as `setScope` takes it. */
  scopeChoices(): [string, string][] {
    const out: [string, string][] = [['session', 'session'], ['project', 'project'], ['global', 'global']];
    if (teamOn()) {
      out.push(['team', 'team']);
      for (const m of [...this.members].sort()) out.push([`team:${m}`, `team: ${m}`]);
    }
    if (this.sessionScope) out.unshift([`session:${this.sessionScope}`, this.scopeLabel()]);
    return out;
  }

  /** The value of `scopeChoices` now chosen. */
  scopeValue(): string {
    if (this.sessionScope) return `session:${this.sessionScope}`;
    return this.scope === 'team' && this.teamMember ? `team:${this.teamMember}` : this.scope;
  }

  /** Choose a scope by its `scopeChoices` value, and search again. */
  async setScope(value: string): Promise<void> {
    if (value === this.scopeValue()) return;
    if (value.startsWith('session:')) return; // (the narrowed session is kept only while chosen)
    this.sessionScope = undefined;
    this.teamMember = value.startsWith('team:') ? value.slice('team:'.length) : undefined;
    this.scope = (this.teamMember !== undefined ? 'team' : value) as Scope;
    this.updateTitle();
    if (this.query) await this.refresh();
  }

  /** Show an answer the Recall… picker already has (no second request). */
  showResult(result: RecallResult, mode: Mode, sessionScope?: string): void {
    this.query = result.query;
    this.mode = mode;
    if (sessionScope !== undefined) this.sessionScope = sessionScope;
    this.results = [result];
    this.current = -1;
    this.keep = undefined;
    this.rebuild();
  }

  async search(query: string, opts: { reveal?: boolean } = {}): Promise<void> {
    this.query = query;
    this.results = [];
    this.current = -1;
    this.keep = undefined;
    this.rebuild();
    if (!query.trim()) return;
    await this.fetch(1);
    if (opts.reveal) await vscode.commands.executeCommand('fabric.recall.focus');
  }

  /** Re-run the search shown when its answer was partial because indexing was still running. */
  async refreshIfPartial(): Promise<void> {
    const first = this.results[0];
    if (!first || first.coverage.complete || !first.coverage.reasons.includes('indexing_in_progress')) return;
    await this.refresh();
  }

  async refresh(): Promise<void> {
    const pages = Math.max(1, this.results.length);
    this.keep = this.current >= 0 && this.current < this.flat.length ? matchKey(this.flat[this.current]) : undefined;
    this.current = -1;
    this.results = [];
    try {
      for (let p = 1; p <= pages; p += 1) if (!(await this.fetch(p))) break;
    } finally {
      this.keep = undefined;
    }
  }

  async loadMore(): Promise<void> {
    const last = this.results[this.results.length - 1];
    if (last?.hasNext) await this.fetch(last.page + 1);
  }

  private async fetch(page: number): Promise<boolean> {
    this.running?.cancel();
    const source = new vscode.CancellationTokenSource();
    this.running = source;
    const cwd = vscode.workspace.workspaceFolders?.[0]?.uri.fsPath;
    const pageSize = vscode.workspace.getConfiguration('fabric').get<number>('recall.pageSize') ?? 25;
    try {
      const result = await vscode.window.withProgress(
        { location: { viewId: 'fabric.recall' } },
        () => this.fabric.request<RecallResult>(Method.recall, {
          query: this.query,
          queryMode: this.mode,
          scope: this.scopeParam(),
          page,
          pageSize,
          ...(cwd ? { cwd } : {}),
        }, source.token),
      );
      if (source.token.isCancellationRequested) return false;
      this.results.push(result);
      this.rebuild();
      return result.hasNext;
    } catch (err) {
      if (source.token.isCancellationRequested) return false;
      this.roots = [{ kind: 'note', text: `Recall failed: ${errorMessage(err)}` }];
      this.changed.fire(undefined);
      return false;
    } finally {
      if (this.running === source) this.running = undefined;
      source.dispose();
    }
  }

  private rebuild(): void {
    // F4 goes on from the match shown, also after a refresh re-ran the search
    const shown = this.current >= 0 && this.current < this.flat.length;
    const keep = shown ? matchKey(this.flat[this.current]) : this.keep;
    const bySession = new Map<string, Extract<Node, { kind: 'session' }>>();
    const roots: Node[] = [];
    this.flat = [];
    for (const result of this.results) {
      for (const item of result.items) {
        if (item.kind === 'segment') {
          const seg = item.segment;
          if (seg.member) this.members.add(seg.member);
          // a team answer may hold two members' sessions under one path
          const key = seg.member ? `${seg.member}\u0000${seg.sessionFile}` : seg.sessionFile;
          let node = bySession.get(key);
          if (!node) {
            node = {
              kind: 'session', sessionId: seg.sessionId, sessionFile: seg.sessionFile, cold: seg.tier === 'cold', entries: [],
              ...(seg.member ? { member: seg.member, machine: seg.machine ?? undefined } : {}),
            };
            bySession.set(key, node);
            roots.push(node);
          }
          const matched = seg.entries.filter((e) => e.matched);
          for (const entry of matched.length > 0 ? matched : seg.entries.slice(0, 1)) {
            const e: EntryNode = { kind: 'entry', parent: node, segment: seg, entry, position: 0 };
            node.entries.push(e);
          }
        } else {
          const p = item.pointer;
          if (!bySession.has(p.sessionFile)) {
            const node: Extract<Node, { kind: 'session' }> = { kind: 'session', sessionId: p.sessionId, sessionFile: p.sessionFile, cold: true, entries: [], pointer: p };
            bySession.set(p.sessionFile, node);
            roots.push(node);
          }
        }
      }
    }
    for (const r of roots) {
      if (r.kind !== 'session') continue;
      for (const e of r.entries) {
        e.position = this.flat.length;
        this.flat.push(e);
      }
    }
    const last = this.results[this.results.length - 1];
    if (last?.hasNext) roots.push({ kind: 'more' });
    if (this.query && last && roots.length === 0) {
      roots.push({ kind: 'note', text: last.authoritative ? 'No matches.' : 'No matches (the search was not complete, see the note above).' });
    }
    this.roots = roots;
    this.names = sessionNames(roots.filter((r): r is Extract<Node, { kind: 'session' }> => r.kind === 'session'));
    this.current = keep === undefined ? -1 : this.flat.findIndex((e) => matchKey(e) === keep);
    const restored = !shown && this.current >= 0 ? this.flat[this.current] : undefined;
    if (this.current >= 0) this.keep = undefined;
    this.updateTitle();
    void this.setContext();
    this.changed.fire(undefined);
    // the refreshed rows are new: select the current match again (not on "Load more")
    if (restored && this.view.visible) void this.view.reveal(restored, { select: true, focus: false }).then(undefined, () => undefined);
  }

  getChildren(node?: Node): Node[] {
    if (!node) return this.roots;
    return node.kind === 'session' ? node.entries : [];
  }

  getParent(node: Node): Node | undefined {
    return node.kind === 'entry' ? node.parent : undefined;
  }

  getTreeItem(node: Node): vscode.TreeItem {
    switch (node.kind) {
      case 'session': {
        const count = node.entries.length;
        const team = teamLabel(node.member, node.machine);
        const named = this.names.get(node.sessionFile);
        const item = new vscode.TreeItem(`${node.member ? `${node.member} · ` : ''}session ${named?.name ?? shortId(node.sessionId)}`, vscode.TreeItemCollapsibleState.Expanded);
        item.description = (node.pointer
          ? `older session · matches ${node.pointer.matchedTerms.join(', ')}`
          : `${count} matching entr${count === 1 ? 'y' : 'ies'}${node.cold ? ' · older session' : ''}${node.machine ? ` · ${node.machine}` : ''}`) + fileNote(named);
        item.iconPath = new vscode.ThemeIcon(node.pointer ? 'archive' : node.member ? 'organization' : 'history');
        item.tooltip = team ? `pushed by ${team} to the team database\n${node.sessionFile} (on that machine)` : node.sessionFile;
        item.contextValue = node.pointer ? 'fabricRecallPointer' : 'fabricRecallSession';
        if (node.pointer) {
          item.collapsibleState = vscode.TreeItemCollapsibleState.None;
          item.command = { command: 'fabricLsp.recallView.searchSession', title: 'Search inside this session', arguments: [node.sessionFile] };
        }
        return item;
      }
      case 'entry': {
        const snip = snippetFor(node.entry.text, this.query, this.mode, 110, 14);
        const label: vscode.TreeItemLabel = {
          label: snip.text || '(empty)',
          highlights: snip.highlights.map((h) => [h.start, h.end] as [number, number]),
        };
        const item = new vscode.TreeItem(label, vscode.TreeItemCollapsibleState.None);
        const time = formatTime(node.entry.timestamp);
        item.description = `${roleLabel(node.entry)}${time ? ` · ${time}` : ''} · line ${node.entry.line + 1}`;
        item.iconPath = new vscode.ThemeIcon(node.entry.isError ? 'error' : ROLE_ICON[node.entry.role ?? ''] ?? 'comment');
        const tip = new vscode.MarkdownString();
        tip.appendText(`${roleLabel(node.entry)} · ${time || 'no time'} · ${node.segment.sessionFile}:${node.entry.line + 1}\n\n`);
        tip.appendCodeblock(snippetFor(node.entry.text, this.query, this.mode, 600).text, 'text');
        item.tooltip = tip;
        // a team entry has no file here: no "Open the JSONL Line" (docs/team.md)
        item.contextValue = node.segment.member ? 'fabricRecallTeamEntry' : 'fabricRecallEntry';
        item.id = `${node.segment.member ?? ''}#${node.segment.sessionFile}#${node.entry.index}#${node.position}`;
        item.command = { command: 'fabricLsp.recallView.open', title: 'Open', arguments: [node] };
        return item;
      }
      case 'more': {
        const last = this.results[this.results.length - 1];
        const shown = this.results.reduce((n, r) => n + r.items.length, 0);
        const item = new vscode.TreeItem(`Load more results (${shown} of ${last?.totalItems ?? '?'} shown)`);
        item.iconPath = new vscode.ThemeIcon('ellipsis');
        item.command = { command: 'fabricLsp.recallView.loadMore', title: 'Load more' };
        return item;
      }
      case 'note':
        return new vscode.TreeItem(node.text);
    }
  }

  /** Open an entry: the expanded entry with the matches highlighted, or its JSONL line. */
  async open(node: EntryNode, how?: 'expanded' | 'jsonl', preserveFocus = false): Promise<void> {
    this.current = node.position;
    const openAs = how ?? vscode.workspace.getConfiguration('fabric').get<string>('recall.openAs') ?? 'expanded';
    const member = node.segment.member ?? undefined;
    if (openAs === 'jsonl' && !member) {
      await openJsonlAt(node.segment.sessionFile, node.entry.line);
      const editor = vscode.window.activeTextEditor;
      if (editor) this.decorate(editor, node.entry.line);
      return;
    }
    const selector = node.entry.entryId ? { entryIds: [node.entry.entryId] } : { indices: [node.entry.index] };
    const ok = await expandAndShow(
      this.fabric,
      // a team item: the stored entry from the team database (its file is on the member's machine)
      { session: node.segment.sessionFile, branches: node.segment.branches, ...selector, ...(member ? { member } : {}) },
      `Entry ${node.entry.entryId ?? `line ${node.entry.line + 1}`} — ${member ? `${member} · ` : ''}${shortId(node.segment.sessionId)}`,
      preserveFocus,
    );
    const editor = vscode.window.visibleTextEditors.find((e) => e.document.uri.scheme === 'fabric' && e.document.uri.path.startsWith('/Entry '))
      ?? vscode.window.activeTextEditor;
    if (ok && editor) this.decorate(editor);
  }

  /** Highlight the matched terms in `editor` and scroll the first one in the entry text into view. */
  decorate(editor: vscode.TextEditor, onlyLine?: number): void {
    const doc = editor.document;
    const ranges: vscode.Range[] = [];
    if (onlyLine !== undefined) {
      const text = doc.lineAt(Math.min(onlyLine, doc.lineCount - 1)).text;
      for (const s of matchSpans(text, this.query, this.mode)) ranges.push(new vscode.Range(onlyLine, s.start, onlyLine, s.end));
    } else {
      const text = doc.getText();
      for (const s of matchSpans(text, this.query, this.mode)) ranges.push(new vscode.Range(doc.positionAt(s.start), doc.positionAt(s.end)));
    }
    editor.setDecorations(this.highlight, ranges);
    if (onlyLine !== undefined) {
      // A JSONL line: its start (type, id, time) in view, not its first match hundreds of
      // columns to the right; the matches are marked on the line and in the ruler.
      const start = new vscode.Position(Math.min(onlyLine, doc.lineCount - 1), 0);
      editor.selection = new vscode.Selection(start, start);
      editor.revealRange(new vscode.Range(start, start), vscode.TextEditorRevealType.InCenterIfOutsideViewport);
      return;
    }
    // The entry text starts after its fence; the first match there is the one to show.
    const fenceLine = Math.max(0, doc.getText().split('\n').findIndex((l) => /^`{3,}text$/.test(l)));
    const first = ranges.find((r) => r.start.line > fenceLine) ?? ranges[0];
    if (first) {
      editor.revealRange(first, vscode.TextEditorRevealType.InCenterIfOutsideViewport);
      editor.selection = new vscode.Selection(first.start, first.start);
    }
  }

  async step(delta: 1 | -1): Promise<void> {
    if (this.flat.length === 0) return;
    const next = this.current < 0 ? (delta > 0 ? 0 : this.flat.length - 1) : (this.current + delta + this.flat.length) % this.flat.length;
    const node = this.flat[next];
    this.current = next;
    await this.view.reveal(node, { select: true, focus: false });
    await this.open(node, undefined, true);
  }

  /** Position of the current match ("3 of 27"), for tests and the status message. */
  currentMatch(): { index: number; total: number } {
    return { index: this.current, total: this.flat.length };
  }

  /** Literal ⇄ regex; `refresh`: search the shown query again (the search box searches
   *  what it holds instead). */
  async toggleMode(refresh = true): Promise<void> {
    this.mode = this.mode === 'regex' ? 'literal' : 'regex';
    this.liveMessage = this.mode === 'regex' && this.query ? regexProblem(this.query) : undefined;
    this.updateTitle();
    await this.setContext();
    if (refresh && this.query && !this.liveMessage) await this.refresh();
  }

  async chooseScope(): Promise<void> {
    type Pick = vscode.QuickPickItem & { scope: Scope; member?: string };
    const picks = (known: Map<string, string>): Pick[] => [
      { label: 'session', description: 'the active session JSONL file', scope: 'session' },
      { label: 'project', description: 'sessions recorded for the workspace folder', scope: 'project' },
      { label: 'global', description: 'every session under the session directory', scope: 'global' },
      { label: 'team', description: 'every member’s pushed sessions (the team database, fabric.team.url)', scope: 'team' },
      // one member's sessions alone: every member the database knows (fabric/teamMembers),
      // and any seen in a team answer since
      ...[...new Set([...known.keys(), ...this.members])].sort().map((m): Pick => ({
        label: `team: ${m}`,
        description: known.get(m) ?? `${m}’s pushed sessions alone`,
        scope: 'team',
        member: m,
      })),
    ];
    const same = (a: Pick, scope: Scope | undefined, member: string | undefined) => a.scope === scope && a.member === member;
    const qp = vscode.window.createQuickPick<Pick>();
    qp.title = 'Fabric: Recall scope';
    qp.placeholder = `now: ${this.scopeLabel()}`;
    qp.items = picks(new Map());
    const now = this.sessionScope ? undefined : qp.items.find((p) => same(p, this.scope, this.scope === 'team' ? this.teamMember : undefined));
    if (now) qp.activeItems = [now];
    let open = true;
    if (teamOn()) {
      // The list shows at once; the members the database knows join it when the server
      // answers (a database that does not answer holds only this busy mark, not the list).
      qp.busy = true;
      void this.teamMembers().then((known) => {
        if (!open) return;
        const active = qp.activeItems[0];
        qp.items = picks(known);
        const again = active && qp.items.find((p) => same(p, active.scope, active.member));
        if (again) qp.activeItems = [again];
        qp.busy = false;
      });
    }
    const chosen = await new Promise<Pick | undefined>((resolve) => {
      qp.onDidAccept(() => {
        resolve(qp.selectedItems[0] ?? qp.activeItems[0]);
        qp.hide();
      });
      qp.onDidHide(() => resolve(undefined));
      qp.show();
    });
    open = false;
    qp.dispose();
    if (!chosen) return;
    this.scope = chosen.scope;
    this.teamMember = chosen.member;
    this.sessionScope = undefined;
    this.updateTitle();
    if (this.query) await this.refresh();
  }

  /** member → a short description ("12 sessions · 340 entries · laptop"), from the
   *  server's fabric/teamMembers when a team database is set; empty otherwise or when it
   *  cannot answer (the scope list then offers the members seen in answers). */
  private async teamMembers(): Promise<Map<string, string>> {
    const out = new Map<string, string>();
    if (!teamOn()) return out;
    try {
      const res = await this.fabric.request<TeamMembersResult>(Method.teamMembers, {});
      for (const m of res.members) {
        out.set(m.member, memberDescription(m));
      }
    } catch {
      // an older server or a failed request: the members seen in answers still show
    }
    return out;
  }

  /**
   * Search as you type, like the Search view: an input whose every keystroke (debounced,
   * the search in flight cancelled) re-runs the search into this view, with buttons for
   * the scope and regex/literal, and the pattern checked as it is typed (the server's
   * error, when it has one, replaces the check's). Enter keeps the results and closes it.
   */
  searchLive(): void {
    const box = vscode.window.createInputBox();
    const cfg = vscode.workspace.getConfiguration('fabric');
    const scopeButton: vscode.QuickInputButton = { iconPath: new vscode.ThemeIcon('filter'), tooltip: scopeTooltip(teamOn()) };
    const regexButton = (): vscode.QuickInputButton => ({
      iconPath: new vscode.ThemeIcon(this.mode === 'regex' ? 'regex' : 'whole-word'),
      tooltip: this.mode === 'regex' ? 'Regular expression (click for literal words)' : 'Literal words (click for a regular expression)',
    });
    const label = () => {
      box.title = `Fabric: Recall into the Results view — ${this.scopeLabel()}${this.mode === 'regex' ? ' — regex' : ''}`;
      box.placeholder = this.mode === 'regex' ? 'A regular expression (case-insensitive)' : 'Literal words (every word is a term)';
      box.buttons = [scopeButton, regexButton()];
    };
    const check = (q: string): boolean => {
      if (this.mode !== 'regex' || !q) {
        box.validationMessage = undefined;
        return true;
      }
      box.validationMessage = regexProblem(q);
      return box.validationMessage === undefined;
    };
    const latest = new LatestOnly<string>(cfg.get<number>('recall.debounceMs') ?? 200, (q, seq) => {
      void this.search(q).then(() => {
        const error = latest.isLatest(seq) ? this.answerError(q) : undefined;
        if (error) box.validationMessage = error;
      });
      return { cancel: () => this.running?.cancel() };
    });
    label();
    box.value = this.query;
    box.onDidChangeValue((q) => { if (check(q)) latest.input(q); });
    box.onDidTriggerButton((b) => {
      if (b === scopeButton) {
        this.sessionScope = undefined;
        this.teamMember = undefined;
        this.scope = nextScope(this.scope, teamOn());
      } else {
        this.mode = this.mode === 'regex' ? 'literal' : 'regex';
        void this.setContext();
      }
      label();
      this.updateTitle();
      if (check(box.value)) latest.now(box.value);
    });
    box.onDidAccept(() => {
      if (check(box.value) && box.value !== this.query) latest.now(box.value);
      box.hide();
      void vscode.commands.executeCommand('fabric.recall.focus');
    });
    // Closing keeps the search of what was typed last running: the view shows its answer.
    box.onDidHide(() => {
      if (check(box.value)) latest.flush(box.value);
      box.dispose();
    });
    // The results stay in view while typing; clicking one keeps the box (Escape closes it).
    box.ignoreFocusOut = true;
    void vscode.commands.executeCommand('fabric.recall.focus').then(() => box.show(), () => box.show());
  }

  async searchSession(sessionFile: string): Promise<void> {
    this.sessionScope = sessionFile;
    await this.refresh();
  }

  /** The rendered results as a plain-text document (the server's `text` is plain text). */
  async openAsText(): Promise<void> {
    if (this.results.length === 0) return;
    const text = this.results.map((r) => r.text).join('\n\n');
    await this.fabric.docs.show(`Recall ${this.query}`, `recall-${Date.now()}`, text, vscode.ViewColumn.Active, 'txt');
  }

  clear(): void {
    this.query = '';
    this.sessionScope = undefined;
    this.results = [];
    this.rebuild();
  }

  dispose(): void {
    this.live?.cancel();
    this.stateChanged.dispose();
    this.running?.cancel();
    this.highlight.dispose();
    this.view.dispose();
    this.changed.dispose();
  }
}
