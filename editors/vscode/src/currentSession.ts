// A status bar item for the session JSONL in the active editor: tokens in context against
// the model window, a pending compaction, the last commit and a live Pi holding it.
import * as fs from 'node:fs';
import * as vscode from 'vscode';
import { Fabric } from './fabric';
import { Method, PreviewResult, StatusResult, isDomainError } from './protocol';
import { activeSession } from './sessions';
import { sessionStatusText } from './statusText';
import { previewOverrides } from './server';

export class CurrentSession implements vscode.Disposable {
  private readonly item: vscode.StatusBarItem;
  private readonly cache = new Map<string, { mtime: number; before: number | null; window?: number }>();
  private timer: NodeJS.Timeout | undefined;
  private seq = 0;
  private readonly disposables: vscode.Disposable[] = [];

  constructor(private readonly fabric: Fabric) {
    this.item = vscode.window.createStatusBarItem('fabric.session', vscode.StatusBarAlignment.Left, 8);
    this.item.name = 'Fabric session';
    this.item.command = 'fabricLsp.previewCompaction';
    this.disposables.push(
      vscode.window.onDidChangeActiveTextEditor(() => this.schedule()),
      vscode.workspace.onDidSaveTextDocument(() => this.schedule()),
    );
    fabric.onDidStart(() => this.schedule());
  }

  /** A preview computed elsewhere (the plan view): reuse its tokens. */
  remember(result: PreviewResult): void {
    const budget = ((result.details ?? {}) as { budget?: { contextWindow?: number } }).budget;
    try {
      const mtime = fs.statSync(result.sessionFile).mtimeMs;
      this.cache.set(result.sessionFile, { mtime, before: result.tokensBefore, window: budget?.contextWindow || undefined });
    } catch {
      // gone
    }
    this.schedule();
  }

  schedule(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = setTimeout(() => { void this.update(); }, 300);
  }

  private async update(): Promise<void> {
    const seq = ++this.seq;
    const active = activeSession();
    if (!active) {
      this.item.hide();
      return;
    }
    let mtime = 0;
    try {
      mtime = fs.statSync(active.session).mtimeMs;
    } catch {
      this.item.hide();
      return;
    }
    let tokens = this.cache.get(active.session);
    let status: StatusResult | undefined;
    try {
      const st = await this.fabric.request<StatusResult>(Method.compactStatus, { session: active.session });
      if (!isDomainError(st)) status = st;
      if (!tokens || tokens.mtime !== mtime) {
        const p = await this.fabric.request<PreviewResult>(Method.compactionPreview, { session: active.session, ...previewOverrides() });
        if (!isDomainError(p)) {
          const budget = ((p.details ?? {}) as { budget?: { contextWindow?: number } }).budget;
          tokens = { mtime, before: p.tokensBefore, window: budget?.contextWindow || undefined };
          this.cache.set(active.session, tokens);
        }
      }
    } catch {
      // The server may be starting; the next editor change tries again.
    }
    if (seq !== this.seq) return;
    const { text, tooltip } = sessionStatusText(tokens, status);
    this.item.text = text;
    this.item.tooltip = tooltip;
    this.item.show();
  }

  dispose(): void {
    if (this.timer) clearTimeout(this.timer);
    for (const d of this.disposables.splice(0)) d.dispose();
    this.item.dispose();
  }
}
