// Pi history where VS Code shows history: a Timeline provider ("Pi sessions") listing the
// operations past Pi sessions did to the open file (`fabric/fileHistory`), newest first
// beside Git's entries. An edit or write opens as a diff (the tool call's before and after
// texts, read from the session JSONL line); a read opens its entry expanded.
//
// The Timeline API is final in VS Code 1.145; earlier builds offer it as a proposal that an
// installed extension may not use. The provider is registered when the API is there and
// usable, and the absence is logged otherwise (the CodeLens and Fabric: File History still
// show the same history).
import * as fs from 'node:fs';
import * as path from 'node:path';
import * as vscode from 'vscode';
import { Fabric, errorMessage } from './fabric';
import { expandAndShow } from './expand';
import { editTexts, lineAt } from './editDiff';
import { piDirExists } from './agentDir';
import { FileHistoryResult, FileOperation, Method } from './protocol';
import { formatTime, shortId } from './render';
import { readGoal, sessionTitle } from './sessions';
import { currentPiDirs } from './server';

// The Timeline API's shapes (vscode.d.ts 1.145), declared here: the extension builds
// against an older @types/vscode so that it installs on older VS Code.
interface TimelineItem {
  timestamp: number;
  label: string;
  id?: string;
  iconPath?: vscode.ThemeIcon;
  description?: string;
  tooltip?: string | vscode.MarkdownString;
  command?: vscode.Command;
  contextValue?: string;
}
interface Timeline {
  readonly paging?: { readonly cursor: string | undefined };
  readonly items: readonly TimelineItem[];
}
interface TimelineOptions {
  cursor?: string;
  limit?: number | { timestamp: number; id?: string };
}
interface TimelineProvider {
  readonly id: string;
  readonly label: string;
  onDidChange?: vscode.Event<{ uri?: vscode.Uri; reset?: boolean } | undefined>;
  provideTimeline(uri: vscode.Uri, options: TimelineOptions, token: vscode.CancellationToken): vscode.ProviderResult<Timeline>;
}
type RegisterTimeline = (scheme: string | string[], provider: TimelineProvider) => vscode.Disposable;

const PAGE = 100;
// A remote window (Remote SSH, WSL, code-server) shows files as `vscode-remote:` to the
// Timeline; this extension host sees their paths.
const SCHEMES = ['file', 'vscode-remote'];
const ICONS: Record<string, string> = { edit: 'edit', write: 'new-file', read: 'eye' };

export class PiTimeline implements TimelineProvider, vscode.Disposable {
  readonly id = 'fabric.piSessions';
  readonly label = 'Pi sessions';
  private readonly changed = new vscode.EventEmitter<{ uri?: vscode.Uri; reset?: boolean } | undefined>();
  readonly onDidChange = this.changed.event;
  private readonly titles = new Map<string, Promise<string>>();

  constructor(private readonly fabric: Fabric) {}

  /** Ask VS Code to read every file's Pi history again (a commit, indexing completed). */
  refresh(): void {
    this.titles.clear();
    this.changed.fire(undefined);
  }

  private title(op: FileOperation): Promise<string> {
    let t = this.titles.get(op.sessionFile);
    if (!t) {
      t = readGoal(op.sessionFile, 48).then((goal) => sessionTitle(goal, op.sessionId, op.sessionFile));
      this.titles.set(op.sessionFile, t);
    }
    return t;
  }

  async provideTimeline(uri: vscode.Uri, options: TimelineOptions, token: vscode.CancellationToken): Promise<Timeline> {
    // A user without Pi gets no server started by opening the Timeline.
    if (!SCHEMES.includes(uri.scheme) || (!this.fabric.started && !piDirExists(currentPiDirs()))) return { items: [] };
    const page = options.cursor ? Number(options.cursor) : 1;
    let result: FileHistoryResult;
    try {
      result = await this.fabric.request<FileHistoryResult>(Method.fileHistory, { path: uri.fsPath, page, pageSize: PAGE }, token);
    } catch (err) {
      this.fabric.output.warn(`timeline: file history of ${uri.fsPath} failed: ${errorMessage(err)}`);
      return { items: [] };
    }
    const items: TimelineItem[] = [];
    for (const [i, op] of result.items.entries()) {
      const when = typeof op.timestamp === 'number' ? op.timestamp : op.timestamp ? Date.parse(op.timestamp) : NaN;
      const title = await this.title(op);
      const failed = op.outcome === 'failed' ? ' (failed)' : '';
      const tip = new vscode.MarkdownString();
      tip.appendText(`Pi ${op.action}${failed} with ${op.toolName} · ${formatTime(op.timestamp)}\n\n${title}\n${op.sessionId}\n`);
      if (op.line !== undefined) tip.appendText(`${op.sessionFile} line ${op.line + 1}\n`);
      if (op.ref) tip.appendText(`${op.ref}\n`);
      items.push({
        id: `${op.sessionFile}#${op.index}#${op.operationAddress ?? op.toolCallId ?? ''}#${(page - 1) * PAGE + i}`,
        timestamp: Number.isFinite(when) ? when : 0,
        label: `Pi ${op.action}${failed}`,
        description: `${title} · ${shortId(op.sessionId)}`,
        tooltip: tip,
        iconPath: new vscode.ThemeIcon(ICONS[op.action] ?? 'history'),
        contextValue: `fabricPiOperation.${op.action}`,
        command: { command: 'fabricLsp.timeline.open', title: 'Open', arguments: [op, result.branches, uri.fsPath] },
      });
    }
    return { items, paging: result.hasNext ? { cursor: String(page + 1) } : undefined };
  }

  dispose(): void {
    this.changed.dispose();
  }
}

/** Opens a Timeline item: an edit or write as a diff of the tool call, else the entry. */
export async function openOperation(fabric: Fabric, op: FileOperation, branches: string, file: string): Promise<void> {
  if ((op.action === 'edit' || op.action === 'write') && op.line !== undefined) {
    let texts;
    try {
      texts = editTexts(lineAt(await fs.promises.readFile(op.sessionFile, 'utf8'), op.line), op.toolCallId);
    } catch (err) {
      fabric.output.warn(`timeline: cannot read ${op.sessionFile}: ${errorMessage(err)}`);
    }
    if (texts) {
      const ext = path.extname(file).replace(/^\./, '') || 'txt';
      const name = path.basename(file);
      const key = `${op.sessionFile}#${op.line}#${op.toolCallId ?? ''}`;
      const left = fabric.docs.set(`${name} before Pi ${texts.tool}`, `before-${key}`, texts.before, ext);
      const right = fabric.docs.set(`${name} after Pi ${texts.tool}`, `after-${key}`, texts.after, ext);
      const what = texts.tool === 'write' ? 'wrote' : 'edited';
      await vscode.commands.executeCommand('vscode.diff', left, right,
        `${name}: Pi ${what} (${shortId(op.sessionId)}, ${formatTime(op.timestamp)})`);
      return;
    }
  }
  await expandAndShow(fabric, { session: op.sessionFile, branches, indices: [op.index] },
    `${op.action} ${op.operationAddress ?? op.entryId ?? `entry index ${op.index}`}`);
}

/**
 * Registers the provider where VS Code has the Timeline API (final in 1.145); undefined
 * (and a log line) where it does not, or where this build refuses the proposal.
 */
export function registerTimeline(fabric: Fabric, provider: PiTimeline): vscode.Disposable | undefined {
  const register = (vscode.workspace as unknown as { registerTimelineProvider?: RegisterTimeline }).registerTimelineProvider;
  if (typeof register !== 'function') {
    fabric.output.info('this VS Code has no Timeline API: Pi history shows in the CodeLens and Fabric: File History');
    return undefined;
  }
  try {
    return register.call(vscode.workspace, SCHEMES, provider);
  } catch (err) {
    fabric.output.info(`the Timeline API is not available to extensions in this VS Code (${errorMessage(err)}): Pi history shows in the CodeLens and Fabric: File History`);
    return undefined;
  }
}
