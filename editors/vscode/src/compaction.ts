// Compaction preview documents and the compaction intents (request / status / cancel),
// with a status bar item while an intent is pending and a notification on commit.
import * as fs from 'node:fs';
import * as path from 'node:path';
import * as vscode from 'vscode';
import { LanguageClient } from 'vscode-languageclient/node';
import { Fabric, errorMessage, showDomainError } from './fabric';
import {
  CommittedNotification, Intent, Method, PreviewResult, SessionsResult, StatusResult, isDomainError,
} from './protocol';
import { parseEntries } from './jsonl';
import { confirmation, planModel } from './plan';
import { PreviewInputs, describeRecord, renderPreview, renderStatus, shortId } from './render';
import { SessionChoice, chooseSession } from './sessions';
import { previewOverrides } from './server';

const MAX_PRESERVE = 16;

/** Instructions and preserve items, asked one input box at a time. */
export async function askInstructions(title: string): Promise<PreviewInputs | undefined> {
  const instructions = await vscode.window.showInputBox({
    title,
    prompt: 'Instructions for the summary (optional, up to 8192 characters)',
    placeHolder: 'e.g. Focus on the database migration',
    ignoreFocusOut: true,
    validateInput: (v) => (Buffer.byteLength(v, 'utf8') > 8192 ? 'At most 8192 bytes' : undefined),
  });
  if (instructions === undefined) return undefined;
  const preserve: string[] = [];
  while (preserve.length < MAX_PRESERVE) {
    const item = await vscode.window.showInputBox({
      title,
      prompt: `Preserve item ${preserve.length + 1} of at most ${MAX_PRESERVE} (empty to finish)`,
      placeHolder: 'A fact the summary must keep verbatim',
      ignoreFocusOut: true,
      validateInput: (v) => (Buffer.byteLength(v, 'utf8') > 2048 ? 'At most 2048 bytes' : undefined),
    });
    if (item === undefined) return undefined;
    if (item.trim() === '') break;
    preserve.push(item);
  }
  return { instructions: instructions || undefined, preserve: preserve.length ? preserve : undefined };
}

/** Where a preview is shown: the plan view (the extension), else a Markdown document. */
export type ShowPreview = (result: PreviewResult, inputs: PreviewInputs) => Promise<void>;

export async function previewCompaction(fabric: Fabric, withInstructions: boolean, target?: SessionChoice, show?: ShowPreview): Promise<void> {
  const choice = target ?? await chooseSession(fabric, 'Fabric: Preview Compaction');
  if (!choice) return;
  let inputs: PreviewInputs = {};
  if (withInstructions) {
    const asked = await askInstructions(`Fabric: Preview Compaction — ${choice.label}`);
    if (!asked) return;
    inputs = asked;
  }
  let result: PreviewResult;
  try {
    result = await vscode.window.withProgress(
      { location: vscode.ProgressLocation.Window, title: `Fabric: previewing compaction of ${choice.label}` },
      (_p, token) => fabric.request<PreviewResult>(Method.compactionPreview, {
        session: choice.session,
        includeQa: true,
        ...previewOverrides(),
        ...(inputs.instructions ? { instructions: inputs.instructions } : {}),
        ...(inputs.preserve ? { preserve: inputs.preserve } : {}),
      }, token),
    );
  } catch (err) {
    void vscode.window.showErrorMessage(`Fabric: compaction preview failed: ${errorMessage(err)}`);
    return;
  }
  if (isDomainError(result)) {
    await showDomainError(fabric, 'compaction preview', result.error);
    return;
  }
  if (show) {
    await show(result, inputs);
    return;
  }
  const id = result.sessionId ?? choice.sessionId ?? choice.label;
  await fabric.docs.show(
    `Compaction Preview — ${shortId(id)}${withInstructions ? ' (instructions)' : ''}`,
    `preview-${choice.session}-${withInstructions}`,
    renderPreview(result, inputs),
  );
}

/** Tracks intents this window requested, so the status bar shows what is pending. */
export class Intents implements vscode.Disposable {
  private readonly pending = new Map<string, { label: string; intent: Intent }>();
  private readonly item: vscode.StatusBarItem;
  private timer: NodeJS.Timeout | undefined;
  private readonly subscriptions: vscode.Disposable[] = [];
  private readonly changes = new vscode.EventEmitter<string>();
  /** Fired with a session file whose intent changed (requested, cancelled, committed). */
  readonly onDidChange = this.changes.event;
  private readonly commits = new vscode.EventEmitter<string>();
  /** Fired with a session file when a compaction of it was committed (or failed). */
  readonly onDidCommit = this.commits.event;

  constructor(private readonly fabric: Fabric) {
    this.item = vscode.window.createStatusBarItem('fabric.intent', vscode.StatusBarAlignment.Left, 9);
    this.item.name = 'Fabric compaction intent';
    this.item.command = 'fabricLsp.compactionStatus';
    fabric.onDidStart((client) => this.attach(client));
  }

  private attach(client: LanguageClient): void {
    this.subscriptions.push(client.onNotification(Method.compactionCommitted, (n: CommittedNotification) => {
      const label = this.pending.get(n.session)?.label ?? path.basename(n.session);
      this.pending.delete(n.session);
      this.changes.fire(n.session);
      this.commits.fire(n.session);
      this.refresh();
      const text = `Fabric: compaction of ${label} ${describeRecord(n.record)}`;
      const show = n.record.status === 'failed' ? vscode.window.showWarningMessage : vscode.window.showInformationMessage;
      void show(text, 'Open Session').then((choice) => {
        if (choice && path.isAbsolute(n.session)) void vscode.window.showTextDocument(vscode.Uri.file(n.session));
      });
    }));
    // Intents may be pending from an earlier window or another client (Neovim, the CLI):
    // look at this project's newest sessions once, then poll only what is pending.
    void this.discover().then(() => this.poll());
  }

  private async discover(): Promise<void> {
    const cwd = vscode.workspace.workspaceFolders?.[0]?.uri.fsPath;
    if (!cwd) return;
    try {
      const res = await this.fabric.request<SessionsResult>(Method.sessions, { scope: 'project', cwd, pageSize: 10 });
      for (const s of res.sessions) {
        const status = await this.fabric.request<StatusResult>(Method.compactStatus, { session: s.sessionFile });
        if (!isDomainError(status) && status.pending) this.track(s.sessionFile, s.sessionId, status.pending);
      }
    } catch (err) {
      this.fabric.output.debug(`pending-intent discovery skipped: ${errorMessage(err)}`);
    }
  }

  track(session: string, label: string, intent: Intent | undefined): void {
    const had = this.pending.has(session);
    if (intent) this.pending.set(session, { label, intent });
    else this.pending.delete(session);
    if (had !== Boolean(intent)) this.changes.fire(session);
    this.refresh();
  }

  private refresh(): void {
    if (this.pending.size === 0) {
      this.item.hide();
      if (this.timer) clearInterval(this.timer);
      this.timer = undefined;
      return;
    }
    const names = [...this.pending.values()].map((p) => p.label);
    this.item.text = `$(watch) Fabric: compaction pending${names.length > 1 ? ` (${names.length})` : ''}`;
    this.item.tooltip = `Compaction requested for ${names.join(', ')}; it commits when the session is settled.`;
    this.item.show();
    if (!this.timer) this.timer = setInterval(() => { void this.poll(); }, 5000);
  }

  private async poll(): Promise<void> {
    for (const [session, p] of [...this.pending]) {
      try {
        const status = await this.fabric.request<StatusResult>(Method.compactStatus, { session });
        if (!isDomainError(status)) this.track(session, p.label, status.pending ?? undefined);
      } catch {
        // The server may be restarting; try again on the next tick.
      }
    }
  }

  async request(target?: SessionChoice): Promise<void> {
    const choice = target ?? await chooseSession(this.fabric, 'Fabric: Request Compaction');
    if (!choice) return;
    const inputs = await askInstructions(`Fabric: Request Compaction — ${choice.label}`);
    if (!inputs) return;
    const ask = vscode.workspace.getConfiguration('fabric').get<boolean>('compact.confirm', true);
    if (ask && !(await this.confirm(choice, inputs))) return;
    try {
      const res = await this.fabric.request<{ pending: Intent }>(Method.compactRequest, {
        session: choice.session,
        requestedBy: 'vscode',
        ...(inputs.instructions ? { instructions: inputs.instructions } : {}),
        ...(inputs.preserve ? { preserve: inputs.preserve } : {}),
      });
      if (isDomainError(res)) throw new Error(`${res.error.code}: ${res.error.message}`);
      this.track(choice.session, choice.label, res.pending);
      // The status bar item shows the pending intent from now on; this is the one message.
      void vscode.window.showInformationMessage(
        `Fabric: compaction of ${choice.label} requested; Fabric commits it when the session is next settled.`,
      );
    } catch (err) {
      void vscode.window.showErrorMessage(`Fabric: compaction request failed: ${errorMessage(err)}`);
    }
  }

  /**
   * Asks before a request is sent (`fabric.compact.confirm`): a modal naming the session,
   * the entries replaced and the tokens saved, from a preview with the settings the commit
   * uses (no preview overrides) and the request's instructions. True to send.
   */
  private async confirm(choice: SessionChoice, inputs: PreviewInputs): Promise<boolean> {
    let result: PreviewResult;
    try {
      result = await vscode.window.withProgress(
        { location: vscode.ProgressLocation.Notification, title: `Fabric: what would a compaction of ${choice.label} do?`, cancellable: true },
        (_p, token) => this.fabric.request<PreviewResult>(Method.compactionPreview, {
          session: choice.session,
          ...(inputs.instructions ? { instructions: inputs.instructions } : {}),
          ...(inputs.preserve ? { preserve: inputs.preserve } : {}),
        }, token),
      );
    } catch (err) {
      const go = await vscode.window.showWarningMessage(
        `Could not preview the compaction of “${choice.label}”. Request it anyway?`,
        { modal: true, detail: `${errorMessage(err)}\n\nA compaction is appended to the session file and cannot be undone from the editor.` },
        'Request Anyway',
      );
      return go === 'Request Anyway';
    }
    if (isDomainError(result)) {
      await showDomainError(this.fabric, 'compaction preview', result.error);
      return false;
    }
    let text = '';
    try {
      text = await fs.promises.readFile(result.sessionFile, 'utf8');
    } catch {
      // Unreadable now: the question names the entries without their lines.
    }
    const q = confirmation(planModel(result, parseEntries(text)), choice.label, result.tokensBefore);
    const go = await vscode.window.showWarningMessage(q.message, { modal: true, detail: q.detail }, q.action);
    return go === q.action;
  }

  async status(target?: SessionChoice): Promise<void> {
    const choice = target ?? await this.choose('Fabric: Compaction Status');
    if (!choice) return;
    try {
      const res = await this.fabric.request<StatusResult>(Method.compactStatus, { session: choice.session });
      if (isDomainError(res)) throw new Error(`${res.error.code}: ${res.error.message}`);
      this.track(choice.session, choice.label, res.pending ?? undefined);
      // a document that stays (asked again, the same document shows the new answer)
      await this.fabric.docs.show(`Compaction status — ${choice.label}`, `status-${choice.session}`, renderStatus(choice.label, choice.session, res));
    } catch (err) {
      void vscode.window.showErrorMessage(`Fabric: compaction status failed: ${errorMessage(err)}`);
    }
  }

  async cancel(target?: SessionChoice): Promise<void> {
    const choice = target ?? await this.choose('Fabric: Cancel Compaction');
    if (!choice) return;
    try {
      const res = await this.fabric.request<{ cancelled: boolean }>(Method.compactCancel, { session: choice.session });
      if (isDomainError(res)) throw new Error(`${res.error.code}: ${res.error.message}`);
      this.track(choice.session, choice.label, undefined);
      void vscode.window.showInformationMessage(res.cancelled
        ? `Fabric: pending compaction of ${choice.label} cancelled.`
        : `Fabric: nothing was pending for ${choice.label}.`);
    } catch (err) {
      void vscode.window.showErrorMessage(`Fabric: cancel failed: ${errorMessage(err)}`);
    }
  }

  /** With exactly one tracked intent and no session editor, use that intent's session. */
  private async choose(title: string): Promise<SessionChoice | undefined> {
    if (this.pending.size === 1 && !vscode.window.activeTextEditor?.document.uri.fsPath.endsWith('.jsonl')) {
      const [session, p] = [...this.pending][0];
      return { session, label: p.label };
    }
    return chooseSession(this.fabric, title);
  }

  dispose(): void {
    this.changes.dispose();
    this.commits.dispose();
    if (this.timer) clearInterval(this.timer);
    for (const d of this.subscriptions.splice(0)) d.dispose();
    this.item.dispose();
  }
}
