// `fabric.fileHistory`: what past Pi sessions did to a file. The server's CodeLens runs
// the command (registered by the language client); the middleware in server.ts hands its
// result here, and a QuickPick of the operations opens the picked one (an edit as a diff).
import * as vscode from 'vscode';
import { Fabric, errorMessage } from './fabric';
import { openOperation } from './timeline';
import { FileHistoryResult, Method } from './protocol';
import { fileHistoryItems } from './render';

export async function showFileHistory(fabric: Fabric, result: FileHistoryResult): Promise<void> {
  const items = fileHistoryItems(result);
  if (items.length === 0) {
    void vscode.window.showInformationMessage(`Fabric: no Pi session read, edited or wrote ${result.path}`);
    return;
  }
  const more = result.hasNext ? ` (first ${result.items.length} of ${result.totalItems})` : '';
  const picked = await vscode.window.showQuickPick(items, {
    title: `Fabric: ${result.totalItems} operations in ${result.totalSessions} sessions${more}`,
    placeHolder: result.path,
    matchOnDescription: true,
    matchOnDetail: true,
  });
  if (!picked) return;
  // An edit or write opens as a diff of the tool call (as in the Timeline), a read its entry.
  await openOperation(fabric, picked.operation, result.branches, result.path);
}

/** The palette command: the history of the active editor's file (or of `path`). */
export async function fileHistoryCommand(fabric: Fabric, arg?: unknown): Promise<void> {
  const given = arg && typeof arg === 'object' && typeof (arg as { path?: unknown }).path === 'string'
    ? (arg as { path: string }).path : undefined;
  const doc = vscode.window.activeTextEditor?.document;
  const path = given ?? (doc?.uri.scheme === 'file' ? doc.uri.fsPath : undefined);
  if (!path) {
    void vscode.window.showWarningMessage('Fabric: open a file to see its Pi history');
    return;
  }
  try {
    const result = await fabric.request<FileHistoryResult>(Method.fileHistory, { path, pageSize: 200 });
    await showFileHistory(fabric, result);
  } catch (err) {
    void vscode.window.showErrorMessage(`Fabric: file history failed: ${errorMessage(err)}`);
  }
}
