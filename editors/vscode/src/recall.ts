// Fabric: Recall… — a QuickPick with live, debounced search. Each keystroke cancels the
// request in flight ($/cancelRequest via the cancellation token) before a new one starts.
import * as vscode from 'vscode';
import { Fabric, errorMessage, teamOn } from './fabric';
import { Method, Pointer, RecallResult, Segment, SegmentEntry } from './protocol';
import { type SessionName, fileNote, formatTime, roleLabel, sessionNames, shortId } from './render';
import { snippetFor } from './match';
import { activeSession } from './sessions';
import { openEntry, openJsonlAt } from './expand';
import { LatestOnly } from './latest';
import { ACTION_LABELS, type ErrorAction, explainError, reasonText } from './errors';
import { type Scope, nextScope, scopeTooltip, teamLabel } from './scopes';

/** Makes every search's workDoneToken unique in this extension host. */
let searchCount = 0;

interface RecallPick extends vscode.QuickPickItem {
  segment?: Segment;
  entry?: SegmentEntry;
  pointer?: Pointer;
  /** An item that does something about an empty or failed answer. */
  action?: ErrorAction;
}

const LITERAL_PLACEHOLDER = 'Search past Pi sessions: literal words (the regex button switches mode)';
const REGEX_PLACEHOLDER = 'Search past Pi sessions: a regular expression (the regex button switches back to words)';

const OPEN_JSONL: vscode.QuickInputButton = { iconPath: new vscode.ThemeIcon('go-to-file'), tooltip: 'Open the session JSONL at this entry' };
const OPEN_EXPANDED: vscode.QuickInputButton = { iconPath: new vscode.ThemeIcon('open-preview'), tooltip: 'Open the expanded entry' };
const SCOPE_BUTTON: vscode.QuickInputButton = { iconPath: new vscode.ThemeIcon('filter'), tooltip: scopeTooltip(false) };
const REGEX_BUTTON: vscode.QuickInputButton = { iconPath: new vscode.ThemeIcon('regex'), tooltip: 'Toggle regex search' };
const AS_DOCUMENT: vscode.QuickInputButton = { iconPath: new vscode.ThemeIcon('file-text'), tooltip: 'Open these results as a text document' };

function entryItems(segment: Segment, query: string, mode: 'literal' | 'regex', names: Map<string, SessionName>): RecallPick[] {
  const named = names.get(segment.sessionFile);
  const session = named?.name ?? shortId(segment.sessionId);
  const entries = segment.entries.filter((e) => e.matched);
  const team = teamLabel(segment.member, segment.machine);
  return (entries.length > 0 ? entries : segment.entries.slice(0, 1)).map((entry) => ({
    label: `${entry.isError ? '$(error)' : '$(comment)'} ${roleLabel(entry)} · ${formatTime(entry.timestamp) || 'no time'}`,
    description: `${team ? `$(organization) ${team} · ` : ''}session ${session}${segment.tier === 'cold' ? ' (cold)' : ''} · line ${entry.line + 1}${fileNote(named)}`,
    // Centred on the first match (a tool result's match is rarely on its first line).
    detail: snippetFor(entry.text, query, mode, 160).text || '(empty)',
    alwaysShow: true,
    // a team entry's file is on the member's machine: no JSONL button
    buttons: segment.member ? [OPEN_EXPANDED] : [OPEN_EXPANDED, OPEN_JSONL],
    segment,
    entry,
  }));
}

/** A QuickPick sorts the items whose label matches the typed text ahead of the others
 * (`sortByLabel`, true by default): the server's ranking would be lost whenever a label
 * ("fabricOperation (read) · <time>") contains a query word. `sortByLabel` is not in the
 * typed API; VS Code 1.139 takes it from any extension, an older one may refuse it (it
 * was a proposal), and then the picker works as before. */
function keepServerOrder(qp: vscode.QuickPick<RecallPick>): void {
  try {
    (qp as vscode.QuickPick<RecallPick> & { sortByLabel?: boolean }).sortByLabel = false;
  } catch {
    // (an API proposal this extension does not declare)
  }
}

function pointerItem(pointer: Pointer, names: Map<string, SessionName>): RecallPick {
  const named = names.get(pointer.sessionFile);
  return {
    label: `$(archive) session ${named?.name ?? shortId(pointer.sessionId)} · ${formatTime(pointer.lastTs) || 'cold'}${fileNote(named)}`,
    description: `matched: ${pointer.matchedTerms.join(', ')}`,
    detail: 'Cold session: choose to search inside it',
    alwaysShow: true,
    pointer,
  };
}

export class RecallPicker {
  private scope: Scope;
  private regex = false;
  private sessionScope: string | undefined;
  private last: RecallResult | undefined;
  private progressNote: string | undefined;

  constructor(
    private readonly fabric: Fabric,
    /** Every answer shown, also handed to the Recall results view (which stays open). */
    private readonly onResult?: (result: RecallResult, mode: 'literal' | 'regex', sessionScope: string | undefined) => void,
  ) {
    const configured = vscode.workspace.getConfiguration('fabric').get<Scope>('recall.scope') ?? 'project';
    this.scope = configured;
  }

  private scopeParam(): string {
    if (this.sessionScope) return `session:${this.sessionScope}`;
    if (this.scope === 'session') {
      const active = activeSession();
      return active ? `session:${active.session}` : 'project';
    }
    return this.scope;
  }

  /** Search inside one session file only (Sessions… → "Recall in this session…"). */
  inSession(sessionFile: string): this {
    this.sessionScope = sessionFile;
    return this;
  }

  async run(initialQuery?: string): Promise<void> {
    const qp = vscode.window.createQuickPick<RecallPick>();
    qp.placeholder = this.regex ? REGEX_PLACEHOLDER : LITERAL_PLACEHOLDER;
    qp.matchOnDescription = false;
    keepServerOrder(qp);
    // VS Code highlights where the typed words occur in the snippet (every item is
    // `alwaysShow`, so this filters nothing); a regex is not literal text to highlight.
    qp.matchOnDetail = !this.regex;
    const scopeButton: vscode.QuickInputButton = { ...SCOPE_BUTTON, tooltip: scopeTooltip(teamOn()) };
    qp.buttons = [scopeButton, REGEX_BUTTON, AS_DOCUMENT];
    const cfg = vscode.workspace.getConfiguration('fabric');
    const debounceMs = cfg.get<number>('recall.debounceMs') ?? 200;
    const pageSize = cfg.get<number>('recall.pageSize') ?? 25;
    const openAs = cfg.get<string>('recall.openAs') ?? 'expanded';
    this.updateTitle(qp);

    const cwd = vscode.workspace.workspaceFolders?.[0]?.uri.fsPath;
    const search = async (query: string, seq: number, token: vscode.CancellationToken) => {
      if (query.trim() === '') {
        qp.busy = false;
        qp.items = [];
        return;
      }
      qp.busy = true;
      // Our own workDoneToken: the picker shows the server's progress ("Indexing 3/12
      // sessions") in its title, and the server needs no progress-create round trip that
      // a cancellation could race with.
      const workDoneToken = `fabric-recall-${process.pid}-${++searchCount}`;
      const progress = this.fabric.onProgress(workDoneToken, (value) => {
        if (!latest.isLatest(seq)) return;
        if (value.kind === 'end') this.progressNote = undefined;
        else this.progressNote = value.message ?? (value.kind === 'begin' ? value.title : this.progressNote);
        this.updateTitle(qp);
      });
      try {
        const result = await this.fabric.request<RecallResult>(Method.recall, {
          query,
          queryMode: this.regex ? 'regex' : 'literal',
          scope: this.scopeParam(),
          pageSize,
          workDoneToken,
          ...(cwd ? { cwd } : {}),
        }, token);
        if (!latest.isLatest(seq)) return;
        this.last = result;
        qp.items = this.toItems(result);
        this.onResult?.(result, this.regex ? 'regex' : 'literal', this.sessionScope);
      } catch (err) {
        if (!latest.isLatest(seq) || token.isCancellationRequested) return;
        qp.items = [{ label: `$(error) Recall failed: ${errorMessage(err)}`, alwaysShow: true }];
      } finally {
        progress.dispose();
        if (latest.isLatest(seq)) {
          qp.busy = false;
          this.progressNote = undefined;
          this.updateTitle(qp);
        }
      }
    };
    // Cancelling the token sends $/cancelRequest for the request in flight.
    const latest = new LatestOnly<string>(debounceMs, (query, seq) => {
      const source = new vscode.CancellationTokenSource();
      void search(query, seq, source.token).finally(() => source.dispose());
      return { cancel: () => source.cancel() };
    });
    const schedule = (query: string) => latest.input(query);

    qp.onDidChangeValue(schedule);
    qp.onDidTriggerButton((button) => {
      if (button === scopeButton) {
        this.sessionScope = undefined;
        this.scope = nextScope(this.scope, teamOn());
      } else if (button === REGEX_BUTTON) {
        this.regex = !this.regex;
        qp.placeholder = this.regex ? REGEX_PLACEHOLDER : LITERAL_PLACEHOLDER;
        qp.matchOnDetail = !this.regex;
      } else if (button === AS_DOCUMENT) {
        if (this.last) {
          // The server's rendering is plain text: a .txt document, never Markdown.
          void this.fabric.docs.show(`Recall ${this.last.query}`, `recall-${Date.now()}`, this.last.text, vscode.ViewColumn.Active, 'txt');
          qp.hide();
        }
        return;
      }
      this.updateTitle(qp);
      latest.now(qp.value);
    });
    qp.onDidTriggerItemButton(({ button, item }) => {
      if (!item.segment || !item.entry) return;
      qp.hide();
      if (button === OPEN_JSONL && !item.segment.member) void openJsonlAt(item.segment.sessionFile, item.entry.line);
      else void openEntry(this.fabric, item.segment, item.entry);
    });
    qp.onDidAccept(() => {
      const item = qp.selectedItems[0];
      if (!item) return;
      if (item.action) {
        if (item.action === 'useLiteral') {
          this.regex = false;
          qp.placeholder = LITERAL_PLACEHOLDER;
          qp.matchOnDetail = true;
        } else if (item.action === 'searchGlobal') {
          this.sessionScope = undefined;
          this.scope = 'global';
        } else {
          qp.hide();
          if (item.action === 'setAgentDir') void vscode.commands.executeCommand('workbench.action.openSettings', 'fabric.agentDir');
          if (item.action === 'teamSettings') void vscode.commands.executeCommand('workbench.action.openSettings', 'fabric.team');
          return;
        }
        this.updateTitle(qp);
        latest.now(qp.value);
        return;
      }
      if (item.pointer) {
        // A cold pointer: narrow the search to that session.
        this.sessionScope = item.pointer.sessionFile;
        this.updateTitle(qp);
        latest.now(qp.value);
        return;
      }
      if (!item.segment || !item.entry) return;
      qp.hide();
      if (openAs === 'jsonl' && !item.segment.member) void openJsonlAt(item.segment.sessionFile, item.entry.line);
      else void openEntry(this.fabric, item.segment, item.entry);
    });
    qp.onDidHide(() => {
      latest.cancel();
      qp.dispose();
    });
    qp.show();
    if (initialQuery) {
      qp.value = initialQuery;
      schedule(initialQuery);
    }
  }

  private updateTitle(qp: vscode.QuickPick<RecallPick>): void {
    const scope = this.sessionScope ? `session ${this.sessionScope.split(/[\\/]/).pop()}` : this.scope;
    const note = this.progressNote ? ` — ${this.progressNote}` : '';
    qp.title = `Fabric: Recall — ${scope}${this.regex ? ' — regex' : ''}${note}`;
  }

  /** What an answer without items says: the error with what to do, or why nothing matched. */
  private emptyItems(result: RecallResult): RecallPick[] {
    const c = result.coverage;
    if (c.error) {
      this.fabric.output.debug(`recall: ${c.error.code}: ${c.error.message}`);
      const e = explainError(c.error, { pattern: this.regex ? result.query : undefined });
      const out: RecallPick[] = [{ label: `$(error) ${e.text}`, detail: e.hint, alwaysShow: true }];
      if (e.action) out.push({ label: `$(arrow-right) ${ACTION_LABELS[e.action]}`, action: e.action, alwaysShow: true });
      return out;
    }
    if (c.eligibleSessions === 0 && result.scope !== 'global') {
      return [{
        label: `No Pi sessions in this ${result.scope === 'project' ? 'project' : 'scope'}`,
        alwaysShow: true,
      }, { label: `$(globe) ${ACTION_LABELS.searchGlobal}`, action: 'searchGlobal', alwaysShow: true }];
    }
    const searched = `${c.indexedSessions} of ${c.eligibleSessions} session${c.eligibleSessions === 1 ? '' : 's'} searched`;
    return [{
      label: result.authoritative ? 'No matches' : '$(warning) No matches so far',
      description: c.complete ? searched : `${searched}: ${c.reasons.map(reasonText).join('; ') || 'the index is not complete'}`,
      alwaysShow: true,
    }];
  }

  private toItems(result: RecallResult): RecallPick[] {
    const items: RecallPick[] = [];
    const names = sessionNames(result.items.map((item) => (item.kind === 'segment' ? item.segment : item.pointer)));
    for (const item of result.items) {
      if (item.kind === 'segment') items.push(...entryItems(item.segment, result.query, this.regex ? 'regex' : 'literal', names));
      else items.push(pointerItem(item.pointer, names));
    }
    if (items.length === 0) {
      items.push(...this.emptyItems(result));
    } else if (result.hasNext) {
      items.push({
        label: `$(ellipsis) ${result.totalItems - result.pageSize} more results: refine the query`,
        alwaysShow: true,
      });
    }
    return items;
  }
}
