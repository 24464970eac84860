// Choosing a session: the active session JSONL file, or a pick from fabric/sessions.
import * as fs from 'node:fs';
import * as path from 'node:path';
import * as vscode from 'vscode';
import { Fabric, errorMessage } from './fabric';
import { Method, SessionInfo, SessionsResult } from './protocol';
import { formatTime, shortId } from './render';

export interface SessionChoice {
  /** What goes into a request's `session` parameter (absolute path of the JSONL). */
  session: string;
  sessionId?: string;
  label: string;
}

/** Reads the header line of a file: Pi session files start with {"type":"session","id":…}. */
export function sessionHeader(file: string): { id?: string; cwd?: string } | undefined {
  let fd: number | undefined;
  try {
    fd = fs.openSync(file, 'r');
    const buf = Buffer.alloc(8192);
    const n = fs.readSync(fd, buf, 0, buf.length, 0);
    const first = buf.subarray(0, n).toString('utf8').split('\n')[0];
    const header = JSON.parse(first);
    if (header && header.type === 'session' && typeof header.id === 'string') return header;
  } catch {
    // Not a session file (or unreadable): the caller falls back to the picker.
  } finally {
    if (fd !== undefined) fs.closeSync(fd);
  }
  return undefined;
}

export function activeSession(): SessionChoice | undefined {
  const doc = vscode.window.activeTextEditor?.document;
  if (!doc || doc.uri.scheme !== 'file' || !doc.uri.fsPath.endsWith('.jsonl')) return undefined;
  const header = sessionHeader(doc.uri.fsPath);
  if (!header) return undefined;
  return { session: doc.uri.fsPath, sessionId: header.id, label: path.basename(doc.uri.fsPath) };
}

function sessionItem(s: SessionInfo): vscode.QuickPickItem & { info: SessionInfo } {
  const size = s.sizeBytes >= 1024 * 1024
    ? `${(s.sizeBytes / 1024 / 1024).toFixed(1)} MB`
    : `${Math.max(1, Math.round(s.sizeBytes / 1024))} KB`;
  return {
    label: `$(history) ${formatTime(s.lastTs ?? s.firstTs) || shortId(s.sessionId)}`,
    description: `${s.sessionId} · ${s.entryCount} entries · ${size} · ${s.tier}`,
    detail: `${s.cwd} — ${path.basename(s.sessionFile)}`,
    info: s,
  };
}

const GLOBAL_BUTTON: vscode.QuickInputButton = { iconPath: new vscode.ThemeIcon('globe'), tooltip: 'Show sessions of all projects' };
const PROJECT_BUTTON: vscode.QuickInputButton = { iconPath: new vscode.ThemeIcon('root-folder'), tooltip: 'Show sessions of this project' };

/** A QuickPick over fabric/sessions; project scope first, global when the project has none. */
export async function pickSessionInfo(fabric: Fabric, title: string): Promise<SessionInfo | undefined> {
  const qp = vscode.window.createQuickPick<vscode.QuickPickItem & { info?: SessionInfo }>();
  qp.title = title;
  qp.placeholder = 'Choose a Pi session';
  qp.matchOnDescription = true;
  qp.matchOnDetail = true;
  qp.busy = true;
  let scope: 'project' | 'global' = 'project';
  const load = async (auto: boolean) => {
    qp.busy = true;
    qp.buttons = [scope === 'project' ? GLOBAL_BUTTON : PROJECT_BUTTON];
    try {
      const cwd = vscode.workspace.workspaceFolders?.[0]?.uri.fsPath;
      const res = await fabric.request<SessionsResult>(Method.sessions, { scope, pageSize: 200, ...(cwd ? { cwd } : {}) });
      if (auto && scope === 'project' && res.sessions.length === 0) {
        scope = 'global';
        return load(false);
      }
      qp.title = `${title} — ${scope} (${res.totalItems})`;
      qp.items = res.sessions.length > 0
        ? res.sessions.map(sessionItem)
        : [{ label: `No sessions found (${scope} scope)`, alwaysShow: true }];
    } catch (err) {
      qp.items = [{ label: `$(error) ${errorMessage(err)}`, alwaysShow: true }];
    } finally {
      qp.busy = false;
    }
  };
  return new Promise<SessionInfo | undefined>((resolve) => {
    qp.onDidTriggerButton(() => { scope = scope === 'project' ? 'global' : 'project'; void load(false); });
    qp.onDidAccept(() => {
      const info = qp.selectedItems[0]?.info;
      if (!info) return;
      resolve(info);
      qp.hide();
    });
    qp.onDidHide(() => { resolve(undefined); qp.dispose(); });
    qp.show();
    void load(true);
  });
}

/** The active session file, or else a picked one. */
export async function chooseSession(fabric: Fabric, title: string): Promise<SessionChoice | undefined> {
  const active = activeSession();
  if (active) return active;
  const info = await pickSessionInfo(fabric, title);
  return info ? { session: info.sessionFile, sessionId: info.sessionId, label: info.sessionId } : undefined;
}
