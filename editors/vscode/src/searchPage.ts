// The Recall Search box's page (pure: no vscode import; unit-tested): a query input with
// a regex toggle, the scope list and a message line, in the theme's input colours. The
// page only reports what the user does ({type: input|accept|regex|scope, value}) and shows
// the state the extension posts ({type: 'state', ...SearchState}).
import { randomBytes } from 'node:crypto';

export interface SearchState {
  query: string;
  regex: boolean;
  /** the chosen scope's value, one of `scopes` */
  scope: string;
  /** [value, label] */
  scopes: [string, string][];
  /** the regex check's or the server's message for what was typed last ('' when none) */
  message: string;
}

const CSS = `
body { padding: 6px 8px 4px; margin: 0; font-family: var(--vscode-font-family); font-size: var(--vscode-font-size); color: var(--vscode-foreground); }
.box { display: flex; align-items: center; background: var(--vscode-input-background); border: 1px solid var(--vscode-input-border, transparent); border-radius: 2px; }
.box:focus-within { outline: 1px solid var(--vscode-focusBorder); outline-offset: -1px; }
.box.invalid { border-color: var(--vscode-inputValidation-errorBorder); }
#q { flex: 1; min-width: 0; border: none; outline: none; background: transparent; color: var(--vscode-input-foreground); padding: 4px 6px; font: inherit; }
#q::placeholder { color: var(--vscode-input-placeholderForeground); }
#regex { margin: 1px 2px; padding: 0 4px; height: 20px; min-width: 22px; border: 1px solid transparent; border-radius: 3px; background: transparent;
  color: var(--vscode-input-foreground); font: 12px var(--vscode-editor-font-family, monospace); cursor: pointer; }
#regex:hover { background: var(--vscode-inputOption-hoverBackground); }
#regex[aria-pressed="true"] { background: var(--vscode-inputOption-activeBackground); border-color: var(--vscode-inputOption-activeBorder); color: var(--vscode-inputOption-activeForeground); }
.scope { display: flex; align-items: center; gap: 6px; margin-top: 5px; }
.scope label { color: var(--vscode-descriptionForeground); }
#scope { flex: 1; min-width: 0; background: var(--vscode-dropdown-background); color: var(--vscode-dropdown-foreground); border: 1px solid var(--vscode-dropdown-border); padding: 2px 4px; font: inherit; }
#msg { margin-top: 5px; white-space: pre-wrap; }
#msg:empty { display: none; }
#msg.error { padding: 3px 6px; background: var(--vscode-inputValidation-errorBackground); border: 1px solid var(--vscode-inputValidation-errorBorder); }
`;

/** The page's script: posts what the user does, shows what it is told. */
const SCRIPT = `
const vscode = acquireVsCodeApi();
const q = document.getElementById('q');
const regex = document.getElementById('regex');
const scope = document.getElementById('scope');
const msg = document.getElementById('msg');
const box = document.querySelector('.box');
function show(s) {
  if (document.activeElement !== q) q.value = s.query; // (never under the user's fingers)
  regex.setAttribute('aria-pressed', s.regex ? 'true' : 'false');
  regex.title = s.regex ? 'Regular expression (click for literal words)' : 'Literal words (click for a regular expression)';
  q.placeholder = s.regex ? 'Search: a regular expression (case-insensitive)' : 'Search past Pi sessions (literal words)';
  scope.replaceChildren(...s.scopes.map(([value, label]) => { const o = document.createElement('option'); o.value = value; o.textContent = label; return o; }));
  scope.value = s.scope;
  msg.textContent = s.message;
  msg.className = s.message ? 'error' : '';
  box.classList.toggle('invalid', !!s.message);
}
q.addEventListener('input', () => vscode.postMessage({ type: 'input', value: q.value }));
q.addEventListener('keydown', (ev) => {
  if (ev.key === 'Enter') vscode.postMessage({ type: 'accept', value: q.value });
  else if (ev.key === 'ArrowDown') { ev.preventDefault(); vscode.postMessage({ type: 'results' }); } // as in the Search view
});
regex.addEventListener('click', () => vscode.postMessage({ type: 'regex', value: q.value }));
scope.addEventListener('change', () => vscode.postMessage({ type: 'scope', value: scope.value }));
window.addEventListener('message', (ev) => {
  const m = ev.data;
  if (m.type === 'state') show(m);
});
vscode.postMessage({ type: 'ready' });
`;

function escapeHtml(s: string): string {
  return s.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c] ?? c);
}

/** The whole page; `state` is what it shows before the extension's first post. */
export function searchPage(cspSource: string, state: SearchState, nonce = randomBytes(18).toString('base64url')): string {
  const options = state.scopes
    .map(([value, label]) => `<option value="${escapeHtml(value)}"${value === state.scope ? ' selected' : ''}>${escapeHtml(label)}</option>`)
    .join('');
  return `<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src ${cspSource} 'unsafe-inline'; script-src 'nonce-${nonce}';">
<meta name="viewport" content="width=device-width, initial-scale=1"><style>${CSS}</style></head>
<body>
<div class="box${state.message ? ' invalid' : ''}"><input id="q" type="text" aria-label="Recall query" spellcheck="false" autocomplete="off" value="${escapeHtml(state.query)}"
 placeholder="Search past Pi sessions (literal words)"><button id="regex" aria-label="Use regular expression" aria-pressed="${state.regex}">.*</button></div>
<div class="scope"><label for="scope">Scope</label><select id="scope">${options}</select></div>
<div id="msg" role="alert" class="${state.message ? 'error' : ''}">${escapeHtml(state.message)}</div>
<script nonce="${nonce}">${SCRIPT}</script></body></html>`;
}
