// One turn: sending a message, following the turn's event stream (and
// resuming it after a cut or a reload), drawing its events, stopping it.

import { APIError, api, enc, readSSE, request } from './api.js';
import { approvalCard, markAnswered, refreshApprovals } from './approvals.js';
import { sendEdit, showBranches } from './branches.js';
import { $, el, hideError, jumpToLatest, nearBottom, pretty, scrollDown, showError } from './dom.js';
import { showImage } from './files.js';
import { addUser, cancelEdit, lastReplyActions, openSession, replyActions, sources } from './messages.js';
import { toast } from './notify.js';
import { loadSessions, offerWorkspace, selectWorkspace } from './sidebar.js';
import { state, store } from './state.js';

// ---- one turn ------------------------------------------------------

// TurnView renders one turn's events as they arrive: text as Markdown,
// steps and tool calls in a collapsible activity log, approvals, files
// and model switches inline where they happened.
class TurnView {
  constructor(turn, root) {
    this.turn = turn;
    this.root = root || pendingReply();
    this.root.dataset.turnId = turn.id;
    this.thinking = this.root.querySelector('.thinking');
    this.text = '';
    this.seg = null;
    this.log = null;
    this.tools = [];
    this.frame = 0;
    this.stopped = false;
  }

  // busy shows the spinner at the end of the reply while the agent works
  // with nothing streaming (before the first token, between tool calls),
  // and hides it while text streams or an approval waits for the user.
  busy(on) {
    if (!this.thinking) return;
    this.thinking.hidden = !on;
    if (on && this.root.lastChild !== this.thinking) this.root.append(this.thinking);
  }

  handle(ev) {
    const d = ev.data || {};
    switch (ev.event) {
      case 'token': this.token(d.content || ''); break;
      case 'step': this.logItem(el('div', 'step', d.content || '')); break;
      case 'tool': this.tool(d); break;
      case 'tool_result': this.toolResult(d); break;
      case 'file_created':
        this.inlineNote('file', (d.fileAction === 'edit' ? 'Edited ' : 'Created ') + (d.filePath || ''));
        if (typeof d.filePath === 'string') showImage(this.root.lastChild, d.filePath);
        break;
      case 'model_switch': this.inlineNote('switch', 'Switched to ' + (d.model || '?') + (d.reason ? ' — ' + d.reason : '')); break;
      case 'approval_required': this.approval(d); break;
      case 'done': this.done(d); break;
      case 'error': this.error(d); break;
      default: break;
    }
    if (this.thinking && ['step', 'tool', 'tool_result', 'file_created', 'model_switch'].includes(ev.event)) this.busy(true);
    scrollDown();
  }

  token(t) {
    this.busy(false);
    if (!this.seg) {
      this.seg = { el: el('div', 'md'), text: '' };
      this.root.append(this.seg.el);
      this.log = null;
    }
    this.seg.text += t;
    this.text += t;
    // Re-render at most once a frame: long replies stream many tokens.
    if (!this.frame) {
      this.frame = requestAnimationFrame(() => this.flush());
    }
  }

  flush() {
    if (this.frame) cancelAnimationFrame(this.frame);
    this.frame = 0;
    if (!this.seg) return;
    // Rendering grows the reply after scrollDown looked: a reader who
    // was at the bottom stays there.
    const follow = nearBottom();
    Markdown.render(this.seg.text, this.seg.el);
    if (follow) $('messages').scrollTop = $('messages').scrollHeight;
    $('jump').hidden = nearBottom();
  }

  activity() {
    if (!this.log) {
      this.flush();
      this.log = el('details', 'activity');
      this.log.open = true;
      this.log.append(el('summary', '', 'Activity'));
      this.root.append(this.log);
      this.seg = null;
    }
    return this.log;
  }

  logItem(node) {
    const log = this.activity();
    log.append(node);
    const steps = log.querySelectorAll(':scope > .step').length;
    const tools = log.querySelectorAll(':scope > .tool:not(.after)').length;
    const results = log.querySelectorAll(':scope > .tool.after').length;
    const parts = [];
    if (steps) parts.push(steps + (steps === 1 ? ' step' : ' steps'));
    if (tools) parts.push(tools + (tools === 1 ? ' tool call' : ' tool calls'));
    if (results) parts.push(results + (results === 1 ? ' result' : ' results'));
    log.firstChild.textContent = 'Activity · ' + parts.join(', ');
  }

  tool(d) {
    const t = el('details', 'tool');
    t.append(el('summary', '', '⚙ ' + (d.name || 'tool')));
    t.append(el('pre', 'tool-input', pretty(d.input)));
    this.logItem(t);
    this.tools.push({ name: d.name, el: t, done: false, approval: null });
  }

  toolResult(d) {
    const t = this.tools.find(x => !x.done && x.name === d.name);
    if (t) t.done = true;
    const res = el('pre', d.isError ? 'tool-result error-text' : 'tool-result', pretty(d.result));
    if (t && t.approval) {
      // The call waited for an approval: its result comes after the
      // card that allowed (or denied) it, where it happened.
      const after = el('details', d.isError ? 'tool after failed' : 'tool after');
      after.open = true;
      after.append(el('summary', '', '⚙ ' + (d.name || 'tool') + ' · result'), res);
      this.logItem(after);
      return;
    }
    const target = t ? t.el : this.activity();
    target.append(res);
    if (t && d.isError) t.el.classList.add('failed');
  }

  inlineNote(cls, text) {
    this.flush();
    this.root.append(el('div', 'note ' + cls, text));
    this.seg = null;
    this.log = null;
  }

  approval(d) {
    this.flush();
    this.busy(false);
    const card = approvalCard(d.requestId, d.toolName, d.input, d.sourceWorkspaceId);
    const t = this.tools.find(x => !x.done && !x.approval && x.name === d.toolName);
    if (t) t.approval = card;
    this.root.append(card);
    this.seg = null;
    this.log = null;
    refreshApprovals();
  }

  finish() {
    this.flush();
    if (this.thinking) this.thinking.remove();
    this.thinking = null;
    this.root.classList.remove('running');
    this.root.querySelectorAll('details.activity').forEach(d => { d.open = false; });
    // An approval nobody answered before the turn ended was not
    // "answered": say that the turn ended (or was stopped) without it.
    // (A call whose result came was answered, here or elsewhere.)
    this.root.querySelectorAll('.approval').forEach(card => {
      const id = card.dataset.requestId;
      if (state.answered.has(id)) return;
      const t = this.tools.find(x => x.approval === card);
      if (t && t.done) markAnswered(id, 'Answered', true);
      else markAnswered(id, this.stopped ? 'Not answered — the turn was stopped' : 'Not answered — the turn ended', true);
    });
    if (!sources.has(this.root)) replyActions(this.root, this.text);
  }

  done(d) {
    // done carries the final text, which may add notes to what streamed.
    if (typeof d.content === 'string' && d.content.startsWith(this.text) && d.content.length > this.text.length) {
      this.token(d.content.slice(this.text.length));
    }
    this.finish();
    const parts = [];
    if (d.model) parts.push(d.model);
    const u = d.tokens || d.usage || {};
    const inT = u.input ?? u.inputTokens ?? u.prompt_tokens;
    const outT = u.output ?? u.outputTokens ?? u.completion_tokens;
    if (inT || outT) parts.push((inT || 0) + ' in / ' + (outT || 0) + ' out');
    if (typeof d.cost === 'number') parts.push('$' + d.cost.toFixed(6));
    if (parts.length) this.tail(el('div', 'meta', parts.join(' · ')));
  }

  // tail adds what follows a finished reply (its cost line, why it
  // ended) above the reply's action buttons.
  tail(node) {
    this.root.insertBefore(node, this.root.querySelector(':scope > .msg-actions'));
  }

  error(d) {
    this.stopped = d.code === 'cancelled' || /cancel/i.test(d.message || '');
    this.finish();
    this.tail(el('div', 'note turn-error', d.message || 'The turn failed.'));
  }
}

// pendingReply is the reply's place, with its spinner, from the moment a
// message is sent until the turn's first token.
function pendingReply() {
  const m = el('div', 'msg assistant running');
  const t = el('div', 'thinking');
  t.setAttribute('role', 'status');
  t.append(el('span', 'spinner'), el('span', '', 'Thinking…'));
  m.append(t);
  $('messages').append(m);
  scrollDown();
  return m;
}

export function send() {
  if (state.editing) return sendEdit($('input').value);
  return sendText($('input').value, true);
}

// sendText sends text as a new message of the open session (a new one
// when none is open). fromInput: the text is the composer's (cleared on
// success, given back on a rejection).
export async function sendText(text, fromInput) {
  const input = $('input');
  if (typeof text !== 'string' || !text.trim() || state.turn || state.sending) return;
  if (!state.workspace) {
    offerWorkspace();
    return;
  }
  state.sending = true; // until the turn starts (or is refused): no second send
  setRunning(true);
  $('stop').hidden = true; // nothing to stop before the turn has an id
  hideError();
  try {
    if (!state.session) {
      const s = await api('POST', '/api/workspaces/' + enc(state.workspace) + '/sessions', {});
      state.session = s.id;
      store.set('session', { workspace: state.workspace, id: state.session });
    }
  } catch (err) {
    showError(err);
    state.sending = false;
    setRunning(false);
    return;
  }
  if (fromInput) input.value = '';
  cancelEdit();
  lastReplyActions();
  const userEl = addUser(text);
  // Its index in the stored history: after the messages on screen that
  // were stored (those of the history, and the replies since).
  userEl.dataset.index = String(document.querySelectorAll('#messages .msg:not(.failed)').length - 1);
  jumpToLatest();
  const pending = pendingReply();
  let resp;
  try {
    const body = { message: text, workspace: state.workspace, session: state.session };
    if ($('model').value) body.model = $('model').value;
    resp = await request('POST', '/api/chat', body);
  } catch (err) {
    // Rejected before any stream started: say why and give the text back.
    showError(err);
    pending.remove();
    userEl.classList.add('failed');
    if (fromInput || !input.value) input.value = text;
    state.sending = false;
    setRunning(false);
    return;
  }
  state.sending = false;
  const turn = { id: resp.headers.get('X-Waggle-Turn-Id'), workspace: state.workspace, session: state.session, message: text, lastEventId: null };
  loadSessions();
  await follow(turn, resp, pending);
}

// follow renders a turn until its terminal event: from resp when given,
// then (after a cut connection, or after a reload) from the turn's event
// route, resuming after the last event id seen.
async function follow(turn, resp, pending) {
  state.turn = turn;
  store.set('turn', turn);
  setRunning(true);
  const view = new TurnView(turn, pending);
  let finished = false;
  let attempts = 0;
  for (;;) {
    if (resp) {
      const before = turn.lastEventId;
      try {
        await readSSE(resp, ev => {
          if (ev.id) {
            turn.lastEventId = ev.id;
            store.set('turn', turn);
          }
          view.handle(ev);
          if (ev.event === 'done' || ev.event === 'error') finished = true;
        });
      } catch (_) { /* cut: resume below */ }
      resp = null;
      if (turn.lastEventId !== before) attempts = 0; // progress: count cuts afresh
    }
    if (finished || state.leaving) break;
    if (attempts++ >= 5) {
      view.finish();
      showError(new APIError(0, 'Lost the connection to this turn.'));
      break;
    }
    if (attempts > 1) await new Promise(r => setTimeout(r, 400 * attempts));
    try {
      resp = await request('GET', '/api/chat/turns/' + enc(turn.id) + '/events', undefined,
        { 'Last-Event-ID': turn.lastEventId || '0' });
    } catch (err) {
      if (err.status === 404) {
        view.finish();
        view.tail(el('div', 'note turn-error', 'This turn is no longer available; its reply is in the history.'));
        break;
      }
      if (err.status && err.status < 500) {
        view.finish();
        showError(err);
        break;
      }
    }
  }
  if (state.leaving) return;
  if (document.hidden) toast('Reply finished', $('title').textContent);
  state.turn = null;
  store.del('turn');
  setRunning(false);
  lastReplyActions();
  loadSessions().then(showBranches);
  refreshApprovals();
}

export async function resume(saved) {
  await selectWorkspace(saved.workspace);
  await openSession(saved.session);
  const msgs = $('messages').querySelectorAll('.msg.user .bubble');
  const last = msgs[msgs.length - 1];
  if (!last || last.textContent !== saved.message) addUser(saved.message);
  // The page has nothing of the turn rendered: replay it from its first
  // event, then follow it live (not awaited: the page is usable meanwhile).
  saved.lastEventId = null;
  follow(saved, null);
}

export async function stop() {
  if (!state.turn) return;
  try {
    await api('POST', '/api/chat/turns/' + enc(state.turn.id) + '/cancel');
  } catch (err) {
    showError(err);
  }
}

function setRunning(on) {
  $('stop').hidden = !on;
  $('send').disabled = on;
  $('new-session').disabled = on;
  document.body.classList.toggle('running', on);
  if (on) lastReplyActions(); // nothing to regenerate while a turn runs
}
