// The "Sessions" view of the Fabric sidebar: project (cwd) → session, each titled by its
// first user goal, with date, size, entries, tier and a mark when a live Pi holds it.
// Pages of `fabric/sessions` load on demand ("Load more"), so every session is reachable
// and the counts say how many are loaded of how many exist.
import * as vscode from 'vscode';
import { Fabric, errorMessage } from './fabric';
import { readGoal } from './sessions';
import { explainError } from './errors';
import { currentPiDirs } from './server';
import { Method, SessionInfo, SessionsResult, StatusResult, isDomainError } from './protocol';
import { formatTime, shortId } from './render';

export const SESSIONS_PAGE_SIZE = 100;

type Node =
  | { kind: 'project'; cwd: string; sessions: SessionInfo[] }
  | { kind: 'session'; info: SessionInfo }
  | { kind: 'more' }
  | { kind: 'note'; text: string };

export function sizeText(bytes: number): string {
  return bytes >= 1024 * 1024 ? `${(bytes / 1024 / 1024).toFixed(1)} MB` : `${Math.max(1, Math.round(bytes / 1024))} KB`;
}

export class SessionsTree implements vscode.TreeDataProvider<Node>, vscode.Disposable {
  private readonly changed = new vscode.EventEmitter<Node | undefined>();
  readonly onDidChangeTreeData = this.changed.event;
  readonly view: vscode.TreeView<Node>;
  private sessions: SessionInfo[] = [];
  private total = 0;
  private page = 0;
  private hasNext = true;
  private loading: Promise<void> | undefined;
  private error: string | undefined;
  /** What the server says about the session dir (it does not exist), named in the empty view. */
  private dirError: string | undefined;
  private readonly titles = new Map<string, string>();
  private readonly status = new Map<string, StatusResult>();
  private projects: Node[] = [];

  constructor(private readonly fabric: Fabric) {
    this.view = vscode.window.createTreeView('fabric.sessions', { treeDataProvider: this, showCollapseAll: true });
    // Enter previews the selected session (package.json keybindings); on a project row it
    // keeps its usual meaning (expand/collapse).
    this.view.onDidChangeSelection((e) => {
      void vscode.commands.executeCommand('setContext', 'fabricLsp.sessionSelected', e.selection[0]?.kind === 'session');
    });
    fabric.onDidStart(() => { void this.reload(); });
  }

  async reload(): Promise<void> {
    this.sessions = [];
    this.total = 0;
    this.page = 0;
    this.hasNext = true;
    this.error = undefined;
    this.status.clear();
    this.projects = [];
    this.loading = undefined;
    await this.loadMore();
  }

  /**
   * Re-read the pages loaded so far and swap them in at once (a commit or the end of
   * indexing changed counts): the tree keeps its pages, its expanded projects and its
   * selection; nothing flashes empty.
   */
  async refresh(): Promise<void> {
    if (this.loading) await this.loading.catch(() => undefined);
    if (this.page === 0) return this.reload();
    const pages = this.page;
    this.loading = (async () => {
      const fresh: SessionInfo[] = [];
      let last: SessionsResult | undefined;
      try {
        for (let page = 1; page <= pages; page += 1) {
          const res = await this.fabric.request<SessionsResult>(Method.sessions, { scope: 'global', page, pageSize: SESSIONS_PAGE_SIZE });
          last = res;
          fresh.push(...res.sessions);
          await this.readTitles(res.sessions);
          if (!res.hasNext) break;
        }
      } catch (err) {
        this.error = errorMessage(err);
        this.group();
        return;
      }
      if (!last) return;
      const seen = new Set<string>();
      this.sessions = fresh.filter((s) => !seen.has(s.sessionFile) && seen.add(s.sessionFile));
      this.page = last.page;
      this.total = last.totalItems;
      this.hasNext = last.hasNext;
      this.dirError = last.coverage.error ? explainError(last.coverage.error).text : undefined;
      this.error = undefined;
      this.status.clear();
      this.group();
    })().finally(() => { this.loading = undefined; });
    return this.loading;
  }

  private async readTitles(sessions: SessionInfo[]): Promise<void> {
    await Promise.all(sessions.map(async (s) => {
      const key = `${s.sessionFile}@${s.mtime}`;
      if (!this.titles.has(key)) this.titles.set(key, await readGoal(s.sessionFile, 120));
    }));
  }

  loadMore(): Promise<void> {
    if (!this.loading) {
      this.loading = this.fetchPage().finally(() => { this.loading = undefined; });
    }
    return this.loading;
  }

  private async fetchPage(): Promise<void> {
    if (!this.hasNext) return;
    try {
      const res = await vscode.window.withProgress({ location: { viewId: 'fabric.sessions' } }, () =>
        this.fabric.request<SessionsResult>(Method.sessions, { scope: 'global', page: this.page + 1, pageSize: SESSIONS_PAGE_SIZE }));
      this.page = res.page;
      this.total = res.totalItems;
      this.dirError = res.coverage.error ? explainError(res.coverage.error).text : undefined;
      this.hasNext = res.hasNext;
      const known = new Set(this.sessions.map((s) => s.sessionFile));
      this.sessions.push(...res.sessions.filter((s) => !known.has(s.sessionFile)));
      await this.readTitles(res.sessions);
      this.error = undefined;
    } catch (err) {
      this.error = errorMessage(err);
    }
    this.group();
  }

  private group(): void {
    const byCwd = new Map<string, SessionInfo[]>();
    for (const s of this.sessions) {
      const list = byCwd.get(s.cwd) ?? [];
      list.push(s);
      byCwd.set(s.cwd, list);
    }
    this.projects = [...byCwd].map(([cwd, sessions]) => ({ kind: 'project', cwd, sessions }));
    this.view.description = this.total > 0
      ? `${this.sessions.length === this.total ? this.total : `${this.sessions.length} of ${this.total}`} sessions`
      : undefined;
    const empty = !this.error && this.total === 0 && !this.hasNext;
    this.view.message = this.error
      ? `Could not list sessions: ${this.error}`
      : empty ? (this.dirError ?? `No Pi sessions in ${currentPiDirs().sessionDirs.join(', ')}.`) : undefined;
    // The welcome view (package.json viewsWelcome) offers "Set Agent Dir…" under the message.
    void vscode.commands.executeCommand('setContext', 'fabricLsp.noSessions', empty);
    this.changed.fire(undefined);
  }

  /** Ask the server which sessions are held by a live Pi or have a pending intent (visible ones only). */
  private refreshStatus(sessions: SessionInfo[]): void {
    void (async () => {
      let changed = false;
      for (const s of sessions) {
        if (this.status.has(s.sessionFile)) continue;
        try {
          const st = await this.fabric.request<StatusResult>(Method.compactStatus, { session: s.sessionFile });
          if (isDomainError(st)) continue;
          this.status.set(s.sessionFile, st);
          if (st.heldBy || st.pending) changed = true;
        } catch {
          return;
        }
      }
      if (changed) this.changed.fire(undefined);
    })();
  }

  /** A session's status changed (an intent was requested, cancelled or committed). */
  forget(sessionFile: string): void {
    this.status.delete(sessionFile);
    this.changed.fire(undefined);
  }

  loadedCount(): { loaded: number; total: number } {
    return { loaded: this.sessions.length, total: this.total };
  }

  async getChildren(node?: Node): Promise<Node[]> {
    if (!node) {
      if (this.page === 0 && this.hasNext) await this.loadMore();
      const out: Node[] = [...this.projects];
      if (this.hasNext && this.page > 0) out.push({ kind: 'more' });
      if (out.length === 0 && this.error) out.push({ kind: 'note', text: this.error });
      return out;
    }
    if (node.kind === 'project') {
      this.refreshStatus(node.sessions);
      return node.sessions.map((info) => ({ kind: 'session', info }));
    }
    return [];
  }

  getTreeItem(node: Node): vscode.TreeItem {
    switch (node.kind) {
      case 'project': {
        const item = new vscode.TreeItem(node.cwd.split('/').filter(Boolean).pop() ?? node.cwd,
          this.projects.length <= 3 ? vscode.TreeItemCollapsibleState.Expanded : vscode.TreeItemCollapsibleState.Collapsed);
        item.description = `${node.sessions.length} session${node.sessions.length === 1 ? '' : 's'}`;
        item.iconPath = new vscode.ThemeIcon('root-folder');
        item.tooltip = node.cwd;
        item.contextValue = 'fabricProject';
        item.id = `project:${node.cwd}`;
        return item;
      }
      case 'session': {
        const s = node.info;
        const title = this.titleOf(s);
        const st = this.status.get(s.sessionFile);
        const item = new vscode.TreeItem(title, vscode.TreeItemCollapsibleState.None);
        const when = formatTime(s.lastTs ?? s.firstTs ?? null).slice(0, 16);
        const marks = [st?.heldBy ? '● live Pi' : '', st?.pending ? 'compaction pending' : ''].filter(Boolean);
        // A cold session's entries are not counted (only its digest is kept): say "older" instead.
        const entries = s.entryCount > 0 || s.tier === 'hot' ? `${s.entryCount} entries` : '';
        item.description = [...marks, when, sizeText(s.sizeBytes), entries, s.tier === 'cold' ? 'cold' : ''].filter(Boolean).join(' · ');
        item.iconPath = new vscode.ThemeIcon(st?.heldBy ? 'pulse' : st?.pending ? 'watch' : s.tier === 'cold' ? 'archive' : 'history');
        const tip = new vscode.MarkdownString();
        tip.appendText(`${this.titles.get(`${s.sessionFile}@${s.mtime}`) ? title : ''}\n\n${s.sessionId}\n${s.sessionFile}\n${s.entryCount} entries · ${sizeText(s.sizeBytes)} · ${s.tier} tier\n`);
        if (st?.heldBy) tip.appendText(`Held by a live Pi (pid ${st.heldBy.pid}) since ${formatTime(st.heldBy.since)}: Pi commits compactions.\n`);
        if (st?.pending) tip.appendText(`Compaction pending since ${formatTime(st.pending.requestedAt)}.\n`);
        item.tooltip = tip;
        tip.appendText('\nEnter or the eye button previews its compaction.');
        item.contextValue = st?.pending ? 'fabricSession.pending' : 'fabricSession';
        item.id = `session:${s.sessionFile}`;
        // No `command`: selecting a row (click, arrow keys, type-to-find) only selects it;
        // a preview runs from Enter, the eye button or the context menu (a preview of a big
        // session takes a while, and arrowing through the list must not start one per row).
        return item;
      }
      case 'more': {
        const item = new vscode.TreeItem(`Load more sessions (${this.sessions.length} of ${this.total} loaded)`);
        item.iconPath = new vscode.ThemeIcon('ellipsis');
        item.command = { command: 'fabricLsp.sessionsView.loadMore', title: 'Load more sessions' };
        item.id = 'more';
        return item;
      }
      case 'note':
        return new vscode.TreeItem(node.text);
    }
  }

  /** The title a session row shows (its first user goal, else a short id). */
  titleOf(info: SessionInfo): string {
    return this.titles.get(`${info.sessionFile}@${info.mtime}`) || `session ${shortId(info.sessionId)}`;
  }

  /** The session of the selected row, for commands run by key (Enter) without an argument. */
  selectedSession(): SessionInfo | undefined {
    const node = this.view.selection[0];
    return node?.kind === 'session' ? node.info : undefined;
  }

  dispose(): void {
    this.view.dispose();
    this.changed.dispose();
  }
}

/** The SessionInfo of a tree node passed to a command (inline actions). */
export function sessionOfNode(arg: unknown): SessionInfo | undefined {
  const node = arg as { kind?: string; info?: SessionInfo } | undefined;
  return node?.kind === 'session' ? node.info : undefined;
}
