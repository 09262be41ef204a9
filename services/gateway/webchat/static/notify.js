// Notifications: toasts for what happens out of view (a reply finished
// while the tab was hidden, an approval waiting elsewhere, the server's
// notification stream).

import { APIError, readSSE, request } from './api.js';
import { refreshApprovals } from './approvals.js';
import { $, button, el, showError } from './dom.js';
import { togglePanel } from './memory.js';
import { openSession } from './messages.js';
import { selectWorkspace } from './sidebar.js';
import { state } from './state.js';

// ---- notifications ---------------------------------------------------
// Toasts for what happens out of view: a reply that finished while the
// tab was hidden, an approval waiting in another session or client, and
// the server's notifications (GET /api/notifications/stream, the
// original's SSE of {type: 'notification', title, body, category};
// absent on a server without the route). While the tab is hidden its
// title is marked until it is seen again.

export function toast(title, body, action) {
  const t = el('div', 'toast');
  t.append(el('strong', '', String(title || 'Notification')));
  t.append(button('×', 'toast-close', () => t.remove()));
  t.lastChild.setAttribute('aria-label', 'Dismiss');
  if (body) t.append(el('div', 'toast-body', String(body)));
  if (action) t.append(button(action.label, 'toast-action', () => { t.remove(); action.run(); }));
  const box = $('toasts');
  box.append(t);
  while (box.children.length > 4) box.firstChild.remove();
  if (document.hidden) document.title = '● Waggle';
}

function showApprovals() {
  if ($('approvals').hidden) togglePanel('approvals');
  refreshApprovals();
}

// pendingSince is when each pending approval was first seen: one still
// not drawn in this page's stream seconds later belongs to another
// session or client (this page's own cards arrive with their events).
const pendingSince = new Map();

export function noticeApprovals(pending) {
  const now = performance.now();
  const ids = new Set(pending.map(p => p.requestId));
  for (const id of [...pendingSince.keys()]) if (!ids.has(id)) pendingSince.delete(id);
  for (const p of pending) {
    const inline = document.querySelector('#messages .approval[data-request-id="' + CSS.escape(p.requestId) + '"]');
    if (inline) {
      pendingSince.set(p.requestId, -1); // shown where it belongs
      continue;
    }
    const since = pendingSince.get(p.requestId);
    if (since === undefined) pendingSince.set(p.requestId, now);
    else if (since >= 0 && now - since >= 3000) {
      pendingSince.set(p.requestId, -1);
      toast('Approval waiting', (p.toolName || 'A tool') + ' wants to run in another session.', { label: 'Show', run: showApprovals });
    }
  }
}

// sessionAction is a toast's "Open" for a notification about a session
// (ids from the server; they only ever reach a URL encoded).
function sessionAction(workspace, session) {
  if (typeof workspace !== 'string' || typeof session !== 'string' || !workspace || !session) return undefined;
  return {
    label: 'Open',
    run: async () => {
      if (state.turn || state.sending) {
        showError(new APIError(0, 'Stop or wait for the running reply first.'));
        return;
      }
      if (workspace !== state.workspace) await selectWorkspace(workspace);
      await openSession(session);
    },
  };
}

// followNotifications reads the server's notification stream for as
// long as the page is open; a server without it (404) is not asked again.
export async function followNotifications() {
  for (let delay = 2000; !state.leaving; delay = Math.min(delay * 2, 60000)) {
    try {
      const resp = await request('GET', '/api/notifications/stream');
      await readSSE(resp, ev => {
        const d = ev.data || {};
        if (ev.event !== 'message') return;
        if (d.type === 'connected') document.body.dataset.notifications = 'connected';
        if (d.type === 'notification') toast(d.title, d.body, sessionAction(d.workspaceId, d.sessionId));
      });
      delete document.body.dataset.notifications;
    } catch (err) {
      if (err.status >= 400 && err.status < 500) return;
    }
    await new Promise(r => setTimeout(r, delay));
  }
}
