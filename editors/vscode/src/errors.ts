// What a domain error or a coverage reason means to the user: one sentence that says what
// is wrong and where, a hint that says what to do, and at most one action the editor can
// offer. Error codes stay in the log (the caller logs `code: message`). Pure (no vscode
// import), so the unit tests load this file directly.

/** Something the editor can do about an error (the caller maps it to a button). */
export type ErrorAction = 'useLiteral' | 'searchGlobal' | 'setAgentDir' | 'pickSession' | 'teamSettings';

export interface Explained {
  text: string;
  hint?: string;
  action?: ErrorAction;
}

export interface DomainError {
  code: string;
  message: string;
  candidates?: string[] | null;
}

/** Labels of the actions, the same in every view. */
export const ACTION_LABELS: Record<ErrorAction, string> = {
  useLiteral: 'Search Literal Words',
  searchGlobal: 'Search All Sessions',
  setAgentDir: 'Set Agent Dir…',
  pickSession: 'Choose a Session…',
  teamSettings: 'Team Settings…',
};

/** The part of an engine message after its first `: ` prefix when it repeats the code. */
function after(prefix: string, message: string): string {
  return message.startsWith(prefix) ? message.slice(prefix.length).trim() : message;
}

export function explainError(err: DomainError, context: { pattern?: string } = {}): Explained {
  const { code, message } = err;
  switch (code) {
    case 'invalid_regex': {
      // "Invalid regular expression: /foo(/iu: Unterminated group"
      const m = /^Invalid regular expression: (\/.*\/[a-z]*): (.*)$/s.exec(message);
      const why = m ? m[2] : after('Invalid regular expression:', message);
      const where = context.pattern !== undefined ? ` “${context.pattern}”` : m ? ` ${m[1]}` : '';
      return {
        text: `The regular expression${where} is not valid: ${why}.`,
        hint: 'Fix the pattern, or search for literal words instead.',
        action: 'useLiteral',
      };
    }
    case 'session_not_found': {
      const what = after('Session not found:', message);
      return {
        text: `No Pi session matches “${what}”.`,
        hint: 'Give a session id (or at least 8 characters of it) or the path of a session JSONL file, or choose one from the list.',
        action: 'pickSession',
      };
    }
    case 'ambiguous_session': {
      // The server's message names the prefix and the matching ids; the candidates are files.
      const files = (err.candidates ?? []).map((c) => c.split(/[\\/]/).pop() ?? c);
      return {
        text: message.endsWith('.') ? message : `${message}.`,
        hint: files.length ? `Or name the file: ${files.slice(0, 5).join(', ')}${files.length > 5 ? ', …' : ''}.` : undefined,
        action: 'pickSession',
      };
    }
    case 'session_dir_missing':
      return { text: message, action: 'setAgentDir' };
    case 'team_not_configured':
      return {
        text: `Team recall is not set up: ${message.replace(/\.$/, '')}.`,
        hint: 'Set fabric.team.url (and fabric.team.member) in your user settings; local recall keeps working.',
        action: 'teamSettings',
      };
    case 'team_unavailable':
      return {
        text: `The team database cannot be reached: ${message.replace(/\.$/, '')}.`,
        hint: 'Check fabric.team.url and that the database server is up.',
        action: 'teamSettings',
      };
    default:
      return { text: message.endsWith('.') ? message : `${message}.` };
  }
}

/** One line: the text, then the hint. */
export function errorLine(e: Explained): string {
  return e.hint ? `${e.text} ${e.hint}` : e.text;
}

const REASONS: Record<string, string> = {
  max_entry_chars: 'long entries are indexed only up to memory.maxEntryChars',
  max_line_bytes: 'an entry on a session line over 64 MiB is read only up to a cut',
  stale: 'some sessions changed since they were indexed',
  cold: 'older sessions are searched by digest (pointers)',
  indexing_in_progress: 'older sessions are still being indexed; the answer is searched again when indexing completes',
  invalid_regex: 'the regular expression is not valid',
  session_dir_missing: 'the Pi session directory does not exist',
  max_sync_sessions: 'more sessions than one call indexes (memory.maxSyncSessions); the rest are indexed in the background',
  max_sync_source_bytes: 'more session data than one call indexes (memory.maxSyncSourceBytes); the rest is indexed in the background',
  regex_timeout: 'the regular expression took too long on some texts',
  team_push_stale: 'your newest sessions are not pushed yet (fabric-lsp team push)',
  team_branches_not_pushed: 'the team database holds the active branches only',
  candidate_entry_budget: 'the team search stopped at its candidate budget (refine the query)',
  candidate_item_budget: 'the team search stopped at its candidate budget (refine the query)',
};

/** A coverage reason in words (unknown codes: the code with spaces). */
export function reasonText(reason: string): string {
  return REASONS[reason] ?? reason.replace(/_/g, ' ');
}
