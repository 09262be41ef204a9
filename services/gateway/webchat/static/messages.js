// The conversation: a session's history drawn as it looked live, the
// per-message actions (copy, edit, regenerate, continue).

import { api, enc } from './api.js';
import { showBranches } from './branches.js';
import { $, button, el, pretty, scrollDown, showError } from './dom.js';
import { showImage } from './files.js';
import { closeMenu, renderSessions } from './sidebar.js';
import { state, store } from './state.js';
import { sendText } from './turn.js';

export async function openSession(id) {
  state.session = id;
  store.set('session', { workspace: state.workspace, id });
  cancelEdit(true);
  closeMenu();
  renderSessions();
  const box = $('messages');
  box.replaceChildren();
  try {
    const h = await api('GET', '/api/history?workspace=' + enc(state.workspace) + '&session=' + enc(id));
    if (state.session !== id) return box; // another session was opened meanwhile
    // Tool events are grouped by the turn that made them and drawn
    // with that turn's reply, as they were shown live.
    const tools = new Map();
    for (const t of h.tools || []) {
      if (!t || !t.turnId) continue;
      if (!tools.has(t.turnId)) tools.set(t.turnId, []);
      tools.get(t.turnId).push(t);
    }
    (h.messages || []).forEach((m, i) => {
      if (m.role === 'user') addUser(m.content).dataset.index = String(i);
      else addAssistant(m.content, m, (m.turnId && tools.get(m.turnId)) || []);
    });
    await showBranches();
  } catch (err) {
    showError(err);
  }
  box.scrollTop = box.scrollHeight;
  $('jump').hidden = true;
  lastReplyActions();
  return box;
}

// sources keeps each message's own text (a reply's Markdown source) for
// Copy, Edit and Regenerate.
export const sources = new WeakMap();

export function addUser(text) {
  const m = el('div', 'msg user');
  m.append(el('div', 'bubble', text));
  sources.set(m, text);
  const bar = el('div', 'msg-actions');
  bar.append(
    button('Copy', 'copy-msg', ev => Markdown.copy(sources.get(m), ev.currentTarget)),
    button('Edit', 'edit-msg', () => startEdit(m)),
  );
  m.append(bar);
  $('messages').append(m);
  scrollDown();
  return m;
}

// replyActions gives a finished reply its Copy button (Regenerate and
// Continue are added to the last reply only, by lastReplyActions).
export function replyActions(m, text) {
  sources.set(m, text);
  const bar = el('div', 'msg-actions');
  bar.append(button('Copy', 'copy-msg', ev => Markdown.copy(sources.get(m), ev.currentTarget)));
  m.append(bar);
}

// lastReplyActions offers Regenerate (and Continue, for a reply that
// was stopped or failed) on the last reply while nothing runs.
export function lastReplyActions() {
  document.querySelectorAll('#messages .regen, #messages .continue').forEach(b => b.remove());
  if (state.turn || state.sending) return;
  const msgs = [...document.querySelectorAll('#messages .msg')];
  const last = msgs[msgs.length - 1];
  const bar = last && last.classList.contains('assistant') && last.querySelector(':scope > .msg-actions');
  const asked = [...msgs].reverse().find(x => x.classList.contains('user'));
  if (!bar || !asked) return;
  bar.append(button('Regenerate', 'regen', () => sendText(sources.get(asked))));
  if (last.querySelector(':scope > .note.turn-error')) {
    bar.append(button('Continue', 'continue', () => sendText('Continue from where you stopped.')));
  }
}

// Edit puts a message back into the composer to change and send.
// Sending it makes a branch (sendEdit): a new session with the messages
// before it, where the edited text is sent; the original session is
// unchanged, and the message's ‹ › switcher goes between the two.
function startEdit(m) {
  const text = sources.get(m);
  const input = $('input');
  input.value = text;
  state.editing = { el: m };
  document.querySelectorAll('#messages .msg.editing').forEach(x => x.classList.remove('editing'));
  m.classList.add('editing');
  $('editing').hidden = false;
  input.focus();
  input.setSelectionRange(text.length, text.length);
}

export function cancelEdit(clear) {
  if (state.editing) state.editing.el.classList.remove('editing');
  state.editing = null;
  if ($('editing').hidden) return;
  $('editing').hidden = true;
  if (clear) $('input').value = '';
}

// fileActions are the tools whose successful call wrote a file (the
// turn runner's file_created events), with the note shown for them.
const fileActions = { write_file: 'Created ', edit_file: 'Edited ', generate_docx: 'Created ' };

// addAssistant draws a stored reply: its turn's tool calls (input,
// result, denial) and files first, then the text, then why the turn
// ended early when it did. Every stored string becomes text, never HTML.
function addAssistant(text, stored, tools) {
  const m = el('div', 'msg assistant');
  if (stored && stored.turnId) m.dataset.turnId = stored.turnId;
  if (tools && tools.length) {
    const log = el('details', 'activity');
    log.append(el('summary', '', 'Activity · ' + tools.length + (tools.length === 1 ? ' tool call' : ' tool calls')));
    for (const t of tools) {
      const failed = t.isError || t.status === 'error' || t.status === 'denied';
      const card = el('details', failed ? 'tool failed' : 'tool');
      card.append(el('summary', '', '⚙ ' + (t.name || 'tool')));
      card.append(el('pre', 'tool-input', pretty(t.input)));
      if (t.status === 'denied') card.append(el('div', 'approval-outcome', 'Denied'));
      else card.append(el('pre', failed ? 'tool-result error-text' : 'tool-result', pretty(t.result)));
      log.append(card);
    }
    m.append(log);
    for (const t of tools) {
      const path = t.input && typeof t.input === 'object' ? t.input.path : '';
      if (fileActions[t.name] && path && typeof path === 'string' && !(t.isError || t.status !== 'success')) {
        const note = el('div', 'note file', fileActions[t.name] + path);
        m.append(note);
        showImage(note, path);
      }
    }
  }
  const body = el('div', 'md');
  Markdown.render(text, body);
  m.append(body);
  if (stored && stored.error) {
    const stopped = stored.error === 'cancelled';
    m.append(el('div', 'note turn-error' + (stopped ? ' stopped' : ''),
      stopped ? 'Stopped — the turn was cancelled before it finished.' : 'Failed — ' + stored.error));
  }
  replyActions(m, text);
  $('messages').append(m);
  return m;
}
