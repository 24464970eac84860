// The "Compaction plan" view of the Fabric sidebar (a webview): the outcome in one
// sentence, the cut map with links to JSONL lines, the budget bar, QA and the summary
// exactly as committed. "Open as Markdown" renders the same plan as a Markdown document.
import * as fs from 'node:fs';
import * as vscode from 'vscode';
import { Fabric } from './fabric';
import { parseEntries } from './jsonl';
import type { PreviewResult } from './protocol';
import { PLAN_CSS, PlanModel, planHtmlBody, planMarkdown, planModel } from './plan';
import { openJsonlAt } from './expand';
import { shortId } from './render';

export interface ShownPlan {
  model: PlanModel;
  result: PreviewResult;
}

function nonce(): string {
  let s = '';
  for (let i = 0; i < 24; i += 1) s += 'abcdefghijklmnopqrstuvwxyz0123456789'[Math.floor(Math.random() * 36)];
  return s;
}

export function planPage(webview: vscode.Webview, body: string): string {
  const n = nonce();
  return `<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src ${webview.cspSource} 'unsafe-inline'; script-src 'nonce-${n}';">
<meta name="viewport" content="width=device-width, initial-scale=1"><style>${PLAN_CSS}</style></head>
<body>${body}
<script nonce="${n}">
const vscode = acquireVsCodeApi();
document.addEventListener('click', (ev) => {
  const a = ev.target.closest('a.line');
  if (a) { ev.preventDefault(); vscode.postMessage({ type: 'line', line: Number(a.dataset.line) }); return; }
  const b = ev.target.closest('button[data-action]');
  if (b) vscode.postMessage({ type: b.dataset.action });
});
</script></body></html>`;
}

const EMPTY = '<p class="muted">No compaction plan yet. Choose a session in the Sessions view, or run “Fabric: Preview Compaction” on an open session file.</p>';

export class PlanView implements vscode.WebviewViewProvider, vscode.Disposable {
  private view: vscode.WebviewView | undefined;
  private panel: vscode.WebviewPanel | undefined;
  shown: ShownPlan | undefined;
  private readonly listeners = new vscode.EventEmitter<ShownPlan>();
  /** Fired with every plan shown (the status bar reads it). */
  readonly onDidShow = this.listeners.event;
  private readonly disposables: vscode.Disposable[] = [];
  /** A change of the shown plan's session file makes the plan stale. */
  private stale = false;

  constructor(
    private readonly fabric: Fabric,
    private readonly actions: { request: (session: string, sessionId: string) => void; refresh: (session: string) => void },
  ) {
    this.disposables.push(vscode.window.registerWebviewViewProvider('fabric.plan', this, { webviewOptions: { retainContextWhenHidden: true } }));
  }

  resolveWebviewView(view: vscode.WebviewView): void {
    this.view = view;
    view.webview.options = { enableScripts: true };
    view.webview.onDidReceiveMessage((m) => this.onMessage(m));
    view.onDidDispose(() => { this.view = undefined; });
    this.render();
  }

  private body(): string {
    if (!this.shown) return EMPTY;
    const banner = this.stale
      ? '<p class="stale"><strong>This plan is out of date:</strong> the session file changed since it was computed. '
        + '<button data-action="refresh">Refresh</button></p>'
      : '';
    return banner + planHtmlBody(this.shown.model);
  }

  /** The session whose plan is shown, if any. */
  shownSession(): string | undefined {
    return this.shown?.model.sessionFile;
  }

  /** Re-run the preview of the shown session (after a commit of it, or by the user). */
  refreshShown(): void {
    if (this.shown) this.actions.refresh(this.shown.model.sessionFile);
  }

  /** `size`: bytes of the file the plan was computed from; a session only grows, so a
   * different size (not a touch of its mtime) is a change. One stat a second of one file
   * (node's polling watcher: it works for files outside the workspace, and it is watching
   * as soon as this returns). */
  private watch(file: string, size: number): void {
    this.unwatch();
    this.stale = false;
    const listener = (cur: fs.Stats) => {
      if (this.stale || cur.size === size) return;
      this.stale = true;
      this.render();
    };
    fs.watchFile(file, { interval: 1000, persistent: false }, listener);
    this.unwatch = () => fs.unwatchFile(file, listener);
  }

  private unwatch: () => void = () => undefined;

  private render(): void {
    if (this.view) this.view.webview.html = planPage(this.view.webview, this.body());
    if (this.panel) this.panel.webview.html = planPage(this.panel.webview, this.body());
    if (this.view) this.view.description = this.shown ? `${shortId(this.shown.model.sessionId)}${this.stale ? ' · out of date' : ''}` : undefined;
  }

  /** Show a preview result; the JSONL is read for the cut map's lines. */
  async show(result: PreviewResult, inputs: { instructions?: string; preserve?: string[] } = {}, where: 'sidebar' | 'panel' = 'sidebar'): Promise<void> {
    let text = '';
    try {
      text = await fs.promises.readFile(result.sessionFile, 'utf8');
    } catch {
      // A session we cannot read: the plan shows no cut map.
    }
    this.shown = { model: planModel(result, parseEntries(text), inputs), result };
    this.watch(result.sessionFile, Buffer.byteLength(text));
    this.listeners.fire(this.shown);
    if (where === 'panel') {
      this.openPanel();
    } else {
      await vscode.commands.executeCommand('fabric.plan.focus');
    }
    this.render();
  }

  openPanel(): void {
    if (!this.panel) {
      this.panel = vscode.window.createWebviewPanel('fabric.planPanel', 'Compaction Plan', vscode.ViewColumn.Active, { enableScripts: true });
      this.panel.webview.onDidReceiveMessage((m) => this.onMessage(m));
      this.panel.onDidDispose(() => { this.panel = undefined; });
    } else {
      this.panel.reveal();
    }
    if (this.shown) this.panel.title = `Compaction Plan — ${shortId(this.shown.model.sessionId)}`;
    this.render();
  }

  /**
   * The plan as a Markdown file in the extension's own storage (`plans/<session id>.md`,
   * rewritten each time), shown in the Markdown preview: its cut-map links are paths
   * relative to it, which the preview opens at their JSONL lines (a virtual document's
   * `file:` links would render as text).
   */
  async openMarkdown(): Promise<void> {
    if (!this.shown) return;
    const dir = vscode.Uri.joinPath(this.fabric.context.globalStorageUri, 'plans');
    const uri = vscode.Uri.joinPath(dir, `${this.shown.model.sessionId.replace(/[^A-Za-z0-9_.-]/g, '_')}.md`);
    try {
      await fs.promises.mkdir(dir.fsPath, { recursive: true, mode: 0o700 });
      await fs.promises.writeFile(uri.fsPath, planMarkdown(this.shown.model, dir.fsPath), { mode: 0o600 });
    } catch (err) {
      void vscode.window.showErrorMessage(`Fabric: cannot write the plan to ${uri.fsPath}: ${err instanceof Error ? err.message : String(err)}`);
      return;
    }
    await vscode.commands.executeCommand('markdown.showPreview', uri);
  }

  private onMessage(m: { type?: string; line?: number }): void {
    const shown = this.shown;
    if (!shown) return;
    switch (m.type) {
      case 'line': void openJsonlAt(shown.model.sessionFile, m.line ?? 0); break;
      case 'openJsonl': void openJsonlAt(shown.model.sessionFile, 0); break;
      case 'markdown': void this.openMarkdown(); break;
      case 'request': this.actions.request(shown.model.sessionFile, shown.model.sessionId); break;
      case 'refresh': this.actions.refresh(shown.model.sessionFile); break;
      default: break;
    }
  }

  dispose(): void {
    this.unwatch();
    this.panel?.dispose();
    this.listeners.dispose();
    for (const d of this.disposables.splice(0)) d.dispose();
  }
}
