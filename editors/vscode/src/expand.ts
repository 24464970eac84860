// Expanding entries into read-only documents, and opening session JSONL files at a line.
import * as vscode from 'vscode';
import { Fabric, errorMessage, showDomainError } from './fabric';
import { ExpandResult, Method, Segment, SegmentEntry, isDomainError } from './protocol';
import { entryIdsOnLines, parseEntryInput, referenceAt } from './entryInput';
import * as fs from 'node:fs';
import { renderExpand, shortId } from './render';
import { activeSession, sessionHeader } from './sessions';

export async function openJsonlAt(file: string, line: number): Promise<void> {
  const doc = await vscode.workspace.openTextDocument(vscode.Uri.file(file));
  const pos = new vscode.Position(Math.max(0, Math.min(line, doc.lineCount - 1)), 0);
  await vscode.window.showTextDocument(doc, { selection: new vscode.Range(pos, pos), preview: false });
}

/** Ask the server to expand; show the entries, or the domain error as a message. */
export async function expandAndShow(fabric: Fabric, params: Record<string, unknown>, title: string, preserveFocus = false): Promise<boolean> {
  let result: ExpandResult | { error: { code: string; message: string; candidates?: string[] } };
  try {
    result = await vscode.window.withProgress(
      { location: vscode.ProgressLocation.Window, title: 'Fabric: expanding' },
      (_p, token) => fabric.request<ExpandResult>(Method.expand, params, token),
    );
  } catch (err) {
    void vscode.window.showErrorMessage(`Fabric: expand failed: ${errorMessage(err)}`);
    return false;
  }
  if (isDomainError(result)) {
    await showDomainError(fabric, 'expand', result.error);
    return false;
  }
  await fabric.docs.show(title, `expand-${JSON.stringify(params)}`, renderExpand(result), vscode.ViewColumn.Active, 'md', preserveFocus);
  return true;
}

export async function openEntry(fabric: Fabric, segment: Segment, entry: SegmentEntry): Promise<void> {
  const selector = entry.entryId ? { entryIds: [entry.entryId] } : { indices: [entry.index] };
  await expandAndShow(
    fabric,
    // a team item: the stored entry from the team database (docs/team.md)
    { session: segment.sessionFile, branches: segment.branches, ...selector, ...(segment.member ? { member: segment.member } : {}) },
    `Entry ${entry.entryId ?? `line ${entry.line + 1}`} — ${segment.member ? `${segment.member} · ` : ''}${shortId(segment.sessionId)}`,
  );
}

/** A default for the input box: the reference under the cursor, or the JSONL line's entry. */
function referenceAtCursor(): string | undefined {
  const editor = vscode.window.activeTextEditor;
  if (!editor) return undefined;
  const pos = editor.selection.active;
  const line = editor.document.lineAt(pos.line).text;
  const ref = referenceAt(line, pos.character);
  if (ref) return ref;
  const active = activeSession();
  if (active?.sessionId) {
    try {
      const entry = JSON.parse(line);
      if (entry && typeof entry.id === 'string' && entry.type !== 'session') return `pi-entry:${active.sessionId}/${entry.id}`;
    } catch {
      // Not a JSON line: no default.
    }
  }
  return undefined;
}

export async function expandEntryCommand(fabric: Fabric, arg?: unknown): Promise<void> {
  let value = typeof arg === 'string' ? arg : undefined;
  if (!value) {
    value = await vscode.window.showInputBox({
      title: 'Fabric: Expand Entry',
      prompt: 'pi-entry:<session>/<entryId>, <session>/<entryId>, <session>#<line>[-<last>] (JSONL lines), or <entryId> / <entryId>/<n> in the open session',
      placeHolder: 'pi-entry:<sessionId>/<entryId>',
      value: referenceAtCursor(),
      ignoreFocusOut: true,
      validateInput: (v) => {
        const parsed = parseEntryInput(v, activeSession()?.session);
        return typeof parsed === 'string' && v.trim() ? parsed : undefined;
      },
    });
  }
  if (!value) return;
  const parsed = parseEntryInput(value, activeSession()?.session);
  if (typeof parsed === 'string') {
    void vscode.window.showErrorMessage(`Fabric: ${parsed}`);
    return;
  }
  // A session given as a path of an open file may also be a relative path: resolve it.
  let session = parsed.session;
  if (!session.startsWith('/') && /[\\/]/.test(session) && vscode.workspace.workspaceFolders?.[0]) {
    session = vscode.Uri.joinPath(vscode.workspace.workspaceFolders[0].uri, session).fsPath;
  }
  if (session.startsWith('/') && !sessionHeader(session)) {
    void vscode.window.showWarningMessage(`Fabric: ${session} does not start with a Pi session header`);
  }
  let selector = parsed.selector;
  if (parsed.lines) {
    const ids = await entriesOnLines(fabric, session, parsed.lines.first, parsed.lines.last);
    if (typeof ids === 'string') {
      void vscode.window.showErrorMessage(`Fabric: ${ids}`);
      return;
    }
    if (ids === undefined) return;
    selector = { entryIds: ids };
  }
  await expandAndShow(fabric, { session, ...selector }, `Entry ${parsed.label}`);
}

/**
 * The entry ids on JSONL lines `first`..`last` of a session (a path, id or id prefix: the
 * server resolves ids to the file through an expand of its first entry). undefined when the
 * server's answer was already shown as an error.
 */
async function entriesOnLines(fabric: Fabric, session: string, first: number, last: number): Promise<string[] | string | undefined> {
  let file = session;
  if (!session.startsWith('/')) {
    let res: ExpandResult | { error: { code: string; message: string } };
    try {
      res = await fabric.request<ExpandResult>(Method.expand, { session, indices: [0] });
    } catch (err) {
      return `expand failed: ${errorMessage(err)}`;
    }
    if (isDomainError(res)) {
      await showDomainError(fabric, 'expand', res.error);
      return undefined;
    }
    file = res.sessionFile;
  }
  let text: string;
  try {
    text = await fs.promises.readFile(file, 'utf8');
  } catch (err) {
    return `cannot read ${file}: ${errorMessage(err)}`;
  }
  return entryIdsOnLines(text, first, last, file);
}
