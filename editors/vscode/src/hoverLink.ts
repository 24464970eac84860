// The link a hover on an entry reference (or a session JSONL line) gets: it opens the entry.
// Imports only vscode and the pure reference code, so the client setup (server.ts) and the
// bridge can use it without importing the rest of the extension.
import * as vscode from 'vscode';
import { referenceAt } from './entryInput';

/**
 * A hover on an entry reference or a session JSONL line, with a link that opens the entry
 * (the server's hover text says what the entry is; the link is the editor's to add).
 */
export function withOpenLink(hover: vscode.Hover | undefined | null, doc: vscode.TextDocument, pos: vscode.Position): vscode.Hover | undefined {
  if (!hover) return undefined;
  const text = doc.lineAt(pos.line).text;
  let ref = referenceAt(text, pos.character);
  if (!ref && doc.uri.scheme === 'file' && doc.uri.fsPath.endsWith('.jsonl')) {
    try {
      const id = (JSON.parse(text) as { id?: unknown }).id;
      if (typeof id === 'string' && id) ref = `${doc.uri.fsPath}/${id}`;
    } catch {
      // Not an entry line.
    }
  }
  if (!ref) return hover;
  const link = new vscode.MarkdownString(
    `[$(go-to-file) Open the entry](command:fabricLsp.expandEntry?${encodeURIComponent(JSON.stringify([ref]))} "Expand this entry into a document")`,
    true,
  );
  link.isTrusted = { enabledCommands: ['fabricLsp.expandEntry'] };
  return new vscode.Hover([...hover.contents, link], hover.range);
}
