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

  /**
   * Show `text` as a read-only document titled `title` (unique per `key`): Markdown
   * (`ext` "md", the text must be valid Markdown) or plain text ("txt").
   */
  async show(title: string, key: string, text: string, column = vscode.ViewColumn.Active, ext: 'md' | 'txt' = 'md', preserveFocus = false): Promise<vscode.TextEditor> {
    const uri = this.set(title, key, text, ext);
    const doc = await vscode.workspace.openTextDocument(uri);
    return vscode.window.showTextDocument(doc, { preview: false, viewColumn: column, preserveFocus });
  }

  /** Store `text` under a `fabric:` URI (firing a change when it was shown before). */
  /** `ext`: the document's extension, which picks its language ('md', 'txt', a source file's). */
  set(title: string, key: string, text: string, ext = 'md'): vscode.Uri {
    const safeTitle = title.replace(/[\\/:*?"<>|#]+/g, ' ').trim() || 'Fabric';
    const uri = vscode.Uri.from({ scheme: VIRTUAL_SCHEME, path: `/${safeTitle}.${ext}`, query: key });
    const known = this.contents.has(uri.toString());
    this.contents.set(uri.toString(), text);
    if (known) this.changed.fire(uri);
    return uri;
  }


  dispose(): void {
    this.changed.dispose();
    this.contents.clear();
  }
}
