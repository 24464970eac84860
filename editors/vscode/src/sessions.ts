// Choosing a session: the active session JSONL file, or a pick from fabric/sessions.
import * as fs from 'node:fs';
import * as path from 'node:path';
import * as vscode from 'vscode';
import { Fabric, errorMessage } from './fabric';
import { firstUserGoal } from './jsonl';
import { Method, SessionInfo, SessionsResult } from './protocol';
import { formatTime, shortId } from './render';

export interface SessionChoice {
  /** What goes into a request's `session` parameter (absolute path of the JSONL). */
  session: string;
  sessionId?: string;
  /** What the user reads: the session's title (its first user goal), else a short id. */
  label: string;
}

/** Bytes of a session file read for its title: Pi's header and first turn fit. */
const TITLE_BYTES = 64 * 1024;

/** The first user goal of a session file ('' when unreadable or none in the first 64 KiB). */
export async function readGoal(file: string, max: number): Promise<string> {
  let handle: fs.promises.FileHandle | undefined;
  try {
    handle = await fs.promises.open(file, 'r');
    const buf = Buffer.alloc(TITLE_BYTES);
    const { bytesRead } = await handle.read(buf, 0, buf.length, 0);
    return firstUserGoal(buf.subarray(0, bytesRead).toString('utf8'), max);
  } catch {
    return '';
  } finally {
    await handle?.close();
  }
}

/** The title a session is shown by: its first user goal, else `session <short id>`. */
export function sessionTitle(goal: string, sessionId: string | undefined, file: string): string {
  return goal || `session ${shortId(sessionId ?? path.basename(file))}`;
}

/** Reads the header line of a file: Pi session files start with {"type":"session","id":…};
 * `goal` is the session's first user goal when it is in the first 64 KiB. */
export function sessionHeader(file: string): { id?: string; cwd?: string; goal: string } | undefined {
  let fd: number | undefined;
  try {
    fd = fs.openSync(file, 'r');
    const buf = Buffer.alloc(TITLE_BYTES);
    const n = fs.readSync(fd, buf, 0, buf.length, 0);
    const text = buf.subarray(0, n).toString('utf8');
    const header = JSON.parse(text.split('\n')[0]);
    if (header && header.type === 'session' && typeof header.id === 'string') return { ...header, goal: firstUserGoal(text, 60) };
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
  return { session: doc.uri.fsPath, sessionId: header.id, label: sessionTitle(header.goal, header.id, doc.uri.fsPath) };
}

/** A session file as a choice, titled by its first user goal. */
export function choiceOf(file: string, sessionId?: string): SessionChoice {
  const header = sessionHeader(file);
  return { session: file, sessionId: sessionId ?? header?.id, label: sessionTitle(header?.goal ?? '', sessionId ?? header?.id, file) };
}

type SessionPick = vscode.QuickPickItem & { info?: SessionInfo; title?: string };

function sessionItem(s: SessionInfo, goal: string): SessionPick {
  const size = s.sizeBytes >= 1024 * 1024
    ? `${(s.sizeBytes / 1024 / 1024).toFixed(1)} MB`
    : `${Math.max(1, Math.round(s.sizeBytes / 1024))} KB`;
  const title = sessionTitle(goal, s.sessionId, s.sessionFile);
  const entries = s.entryCount > 0 || s.tier === 'hot' ? `${s.entryCount} entries` : '';
  return {
    label: `$(history) ${title}`,
    description: [formatTime(s.lastTs ?? s.firstTs).slice(0, 16), entries, size, s.tier === 'cold' ? 'cold' : ''].filter(Boolean).join(' · '),
    detail: `${s.cwd} — ${s.sessionId}`,
    info: s,
    title,
  };
}

const GLOBAL_BUTTON: vscode.QuickInputButton = { iconPath: new vscode.ThemeIcon('globe'), tooltip: 'Show sessions of all projects' };
const PROJECT_BUTTON: vscode.QuickInputButton = { iconPath: new vscode.ThemeIcon('root-folder'), tooltip: 'Show sessions of this project' };

/** A QuickPick over fabric/sessions; project scope first, global when the project has none. */
export async function pickSessionInfo(fabric: Fabric, title: string): Promise<SessionInfo | undefined> {
  return (await pickSession(fabric, title))?.info;
}

/** A picked session with the title it was shown by. */
export async function pickSession(fabric: Fabric, title: string): Promise<{ info: SessionInfo; title: string } | undefined> {
  const qp = vscode.window.createQuickPick<SessionPick>();
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
      const goals = await Promise.all(res.sessions.map((s) => readGoal(s.sessionFile, 60)));
      qp.items = res.sessions.length > 0
        ? res.sessions.map((s, i) => sessionItem(s, goals[i]))
        : [{ label: `No sessions found (${scope} scope)`, alwaysShow: true }];
    } catch (err) {
      qp.items = [{ label: `$(error) ${errorMessage(err)}`, alwaysShow: true }];
    } finally {
      qp.busy = false;
    }
  };
  return new Promise<{ info: SessionInfo; title: string } | undefined>((resolve) => {
    qp.onDidTriggerButton(() => { scope = scope === 'project' ? 'global' : 'project'; void load(false); });
    qp.onDidAccept(() => {
      const picked = qp.selectedItems[0];
      if (!picked?.info) return;
      resolve({ info: picked.info, title: picked.title ?? sessionTitle('', picked.info.sessionId, picked.info.sessionFile) });
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
  const picked = await pickSession(fabric, title);
  return picked ? { session: picked.info.sessionFile, sessionId: picked.info.sessionId, label: picked.title } : undefined;
}
