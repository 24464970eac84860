// The "Recall Search" box of the Fabric sidebar (a small webview above Recall Results),
// like the Search view's own input: every keystroke searches again into the Results view
// (debounced, the search in flight cancelled), with the scope list and the regex toggle
// beside it and the pattern checked as it is typed (the server's error replaces the
// check's). The rules live in RecallView; this view only shows its state and sends input.
import * as vscode from 'vscode';
import type { RecallView } from './recallView';
import { searchPage, SearchState } from './searchPage';

export class RecallSearchView implements vscode.WebviewViewProvider, vscode.Disposable {
  private view: vscode.WebviewView | undefined;
  private readonly disposables: vscode.Disposable[] = [];

  constructor(private readonly recall: RecallView) {
    this.disposables.push(
      vscode.window.registerWebviewViewProvider('fabric.recallSearch', this, { webviewOptions: { retainContextWhenHidden: true } }),
      recall.onDidChangeState(() => this.post()),
    );
  }

  resolveWebviewView(view: vscode.WebviewView): void {
    this.view = view;
    view.webview.options = { enableScripts: true };
    view.webview.html = searchPage(view.webview.cspSource, this.state());
    view.webview.onDidReceiveMessage((m: { type?: string; value?: unknown }) => this.onMessage(m));
    view.onDidDispose(() => { this.view = undefined; });
  }

  private state(): SearchState {
    const r = this.recall;
    return { query: r.query, regex: r.mode === 'regex', scope: r.scopeValue(), scopes: r.scopeChoices(), message: r.liveMessage ?? '' };
  }

  private post(): void {
    void this.view?.webview.postMessage({ type: 'state', ...this.state() });
  }

  private onMessage(m: { type?: string; value?: unknown }): void {
    const value = typeof m.value === 'string' ? m.value : '';
    switch (m.type) {
      case 'ready': this.post(); break;
      case 'input': this.recall.typed(value, 'input'); break;
      case 'accept':
        this.recall.typed(value, 'now');
        void vscode.commands.executeCommand('fabric.recall.focus');
        break;
      case 'results': void vscode.commands.executeCommand('fabric.recall.focus'); break;
      case 'scope': void this.recall.setScope(value); break;
      case 'regex':
        // (the mode flips before toggleMode's first await: the search of what the box holds
        // starts now, in message order, never after a later keystroke's)
        void this.recall.toggleMode(false);
        this.recall.typed(value, 'now');
        break;
      default: break;
    }
  }

  dispose(): void {
    for (const d of this.disposables.splice(0)) d.dispose();
  }
}
