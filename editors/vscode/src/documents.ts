// Read-only virtual documents (scheme `fabric:`) for expanded entries, compaction
// previews and recall results. Content lives in memory, keyed by URI.
import * as vscode from 'vscode';
import { VIRTUAL_SCHEME } from './server';

export class VirtualDocuments implements vscode.TextDocumentContentProvider {
  private readonly contents = new Map<string, string>();
  private readonly changed = new vscode.EventEmitter<vscode.Uri>();
  readonly onDidChange = this.changed.event;

  provideTextDocumentContent(uri: vscode.Uri): string {
    return this.contents.get(uri.toString()) ?? '(this Fabric document is no longer available; run the command again)';
  }

  /** Show `text` as a read-only Markdown document titled `title` (unique per `key`). */
  async show(title: string, key: string, text: string, column = vscode.ViewColumn.Active): Promise<vscode.TextEditor> {
    const safeTitle = title.replace(/[\\/:*?"<>|#]+/g, ' ').trim() || 'Fabric';
    const uri = vscode.Uri.from({ scheme: VIRTUAL_SCHEME, path: `/${safeTitle}.md`, query: key });
    const known = this.contents.has(uri.toString());
    this.contents.set(uri.toString(), text);
    if (known) this.changed.fire(uri);
    const doc = await vscode.workspace.openTextDocument(uri);
    return vscode.window.showTextDocument(doc, { preview: false, viewColumn: column });
  }

  dispose(): void {
    this.changed.dispose();
    this.contents.clear();
  }
}
