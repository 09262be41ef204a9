package approval

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/libs/telemetry"
	"github.com/waggle-os/core/services/approval/grants"
	"github.com/waggle-os/core/services/approval/rules"
)

var (
	errNoPending       = &protocol.Error{Kind: protocol.NotFound, Message: "No pending approval with that ID"}
	errAlreadyDecided  = &protocol.Error{Kind: protocol.Conflict, Message: "Approval already decided"}
	errGrantNotFound   = &protocol.Error{Kind: protocol.NotFound, Message: "Grant not found"}
	errGrantNotWritten = &protocol.Error{Kind: protocol.Internal, Message: "Could not save the grant; nothing was decided. Try again."}
)

func (s *Service) now() time.Time { return s.cfg.Now() }

// decodeArgs reads a tool call's input as the gate rules see it: a JSON
// object, or no arguments at all.
func decodeArgs(input json.RawMessage) map[string]any {
	var args map[string]any
	if json.Unmarshal(input, &args) != nil {
		return nil
	}
	return args
}

// errRepeatedKey refuses an input that names a key twice: the approval card
// would show one value and the rules (and the tool) could read the other.
// The turn runner sends each call's canonical input, which never does.
var errRepeatedKey = protocol.Errorf(protocol.Invalid, "tool input repeats a key")

// repeatsKey reports whether an object anywhere in the JSON text input has
// a key twice. Text that is not JSON does not repeat keys (decodeArgs reads
// it as no arguments).
func repeatsKey(input json.RawMessage) bool {
	dec := json.NewDecoder(bytes.NewReader(input))
	var seen []map[string]bool // one per open object; nil entries for arrays
	expectKey := false
	for {
		tok, err := dec.Token()
		if err != nil {
			return false
		}
		switch tok {
		case json.Delim('{'):
			seen = append(seen, map[string]bool{})
			expectKey = true
			continue
		case json.Delim('['):
			seen = append(seen, nil)
		case json.Delim('}'), json.Delim(']'):
			seen = seen[:len(seen)-1]
		default:
			if key, ok := tok.(string); ok && expectKey {
				top := seen[len(seen)-1]
				if top[key] {
					return true
				}
				top[key] = true
				expectKey = false
				continue
			}
		}
		// After a value: inside an object the next token is a key.
		expectKey = len(seen) > 0 && seen[len(seen)-1] != nil
	}
}

// check decides one tool call: the gate rules and autonomy first, then the
// saved grants, and only then a human, whose pending entry is durable in the
// bucket before the reply goes out.
func (s *Service) check(ctx context.Context, req protocol.ApprovalCheckRequest) (protocol.ApprovalCheckReply, error) {
	if !protocol.ValidID(req.TurnID) || !protocol.ValidID(req.Workspace) || req.ToolName == "" {
		return protocol.ApprovalCheckReply{}, protocol.Errorf(protocol.Invalid, "invalid approval check")
	}
	if repeatsKey(req.Input) {
		return protocol.ApprovalCheckReply{}, errRepeatedKey
	}
	args := decodeArgs(req.Input)
	now := s.now()
	switch d := rules.Decide(req.ToolName, args, req.Autonomy.Effective(now)); d.Action {
	case rules.RunSilently:
		return protocol.ApprovalCheckReply{Action: protocol.ApprovalRun}, nil
	case rules.RunAutoApproved:
		telemetry.Approvals.WithLabelValues("auto").Inc()
		return protocol.ApprovalCheckReply{Action: protocol.ApprovalRun, Step: d.Step}, nil
	}
	// A saved grant never covers a critical call: what no autonomy level
	// may wave through, no "always allow" may either.
	if _, ok := s.grants.Has(req.ToolName, args, req.Workspace); ok && !rules.IsCriticalNeverAutopass(req.ToolName, args) {
		telemetry.Approvals.WithLabelValues("grant").Inc()
		return protocol.ApprovalCheckReply{Action: protocol.ApprovalRun, Step: rules.StepGrant(req.ToolName)}, nil
	}
	input := bytes.TrimSpace(req.Input)
	if len(input) == 0 {
		input = []byte("{}")
	}
	workspace := req.Workspace
	e := protocol.PendingApproval{
		RequestID:         protocol.NewUUID(),
		TurnID:            req.TurnID,
		Workspace:         req.Workspace,
		Session:           req.Session,
		ToolName:          req.ToolName,
		Input:             input,
		SourceWorkspaceID: &workspace,
		Timestamp:         now.UnixMilli(),
		Deadline:          now.Add(s.cfg.Timeout).UnixMilli(),
		State:             protocol.ApprovalStatePending,
	}
	if err := s.pending.create(ctx, e); err != nil {
		return protocol.ApprovalCheckReply{}, err
	}
	return protocol.ApprovalCheckReply{Action: protocol.ApprovalAsk, RequestID: e.RequestID, Deadline: e.Deadline}, nil
}

// decide records a human decision. Exactly one decision wins: the state
// changes by compare-and-set, and a second decision finds a final state
// (409) or no entry (404). An approval with "always" first claims the entry
// (so nothing else can win), then writes the grant, then approves: the
// tool cannot run before its grant is on disk. A critical call is approved
// once and stores no grant, since no grant could cover it.
func (s *Service) decide(ctx context.Context, req protocol.ApprovalDecideRequest) (protocol.ApprovalDecideReply, error) {
	if !protocol.ValidID(req.RequestID) {
		return protocol.ApprovalDecideReply{}, errNoPending
	}
	withGrant := false
	expired := false
	e, err := s.pending.transition(ctx, req.RequestID, func(e *protocol.PendingApproval) (bool, error) {
		now := s.now().UnixMilli()
		expired = false
		withGrant = req.Approved && req.Always && !rules.IsCriticalNeverAutopass(e.ToolName, decodeArgs(e.Input))
		switch {
		case e.State == protocol.ApprovalStateCancelled || e.State == protocol.ApprovalStateTimedOut:
			// Withdrawn by its turn or sub-agent, or timed out: nobody
			// decided it, and it is not pending any more.
			return false, errNoPending
		case e.State != protocol.ApprovalStatePending:
			return false, errAlreadyDecided
		case now >= e.Deadline:
			// Too late for a human: the sweeper would time it out anyway.
			expired = true
			e.State, e.DecidedAt = protocol.ApprovalStateTimedOut, now
		case withGrant:
			e.State = protocol.ApprovalStateClaimed
		case req.Approved:
			e.State, e.DecidedAt = protocol.ApprovalStateApproved, now
		default:
			e.State, e.DecidedAt = protocol.ApprovalStateDenied, now
		}
		return true, nil
	})
	switch {
	case errors.Is(err, errNoEntry):
		return protocol.ApprovalDecideReply{}, errNoPending
	case err != nil:
		return protocol.ApprovalDecideReply{}, err
	case expired:
		return protocol.ApprovalDecideReply{}, errNoPending
	}
	reply := protocol.ApprovalDecideReply{RequestID: req.RequestID, Approved: req.Approved, Always: req.Always}
	if !withGrant {
		telemetry.Approvals.WithLabelValues(e.State).Inc()
		return reply, nil
	}

	if _, err := s.grants.Grant(e.ToolName, decodeArgs(e.Input), req.SourceWorkspaceID); err != nil && !errors.Is(err, grants.ErrNotDurable) {
		s.log.Error("store grant", "request", req.RequestID, "tool", e.ToolName, "err", err)
		// Hand the approval back so the user can try again.
		if _, rerr := s.pending.transition(ctx, req.RequestID, func(e *protocol.PendingApproval) (bool, error) {
			if e.State != protocol.ApprovalStateClaimed {
				return false, nil
			}
			e.State = protocol.ApprovalStatePending
			return true, nil
		}); rerr != nil {
			s.log.Error("release claimed approval", "request", req.RequestID, "err", rerr)
		}
		return protocol.ApprovalDecideReply{}, errGrantNotWritten
	} else if err != nil {
		s.log.Warn("grant stored but not synced", "request", req.RequestID, "err", err)
	}
	final, err := s.pending.transition(ctx, req.RequestID, func(e *protocol.PendingApproval) (bool, error) {
		if e.State != protocol.ApprovalStateClaimed {
			return false, nil
		}
		e.State, e.DecidedAt, e.Always = protocol.ApprovalStateApproved, s.now().UnixMilli(), true
		return true, nil
	})
	if err != nil && !errors.Is(err, errNoEntry) {
		return protocol.ApprovalDecideReply{}, err
	}
	if err != nil || final.State != protocol.ApprovalStateApproved {
		// The deadline passed while the grant was written; the grant stays
		// (the user asked for it) but this call timed out.
		return protocol.ApprovalDecideReply{}, errNoPending
	}
	telemetry.Approvals.WithLabelValues(protocol.ApprovalStateApproved).Inc()
	return reply, nil
}

// resolve ends a pending approval without a human. A decision that won
// first stands and is returned.
func (s *Service) resolve(ctx context.Context, req protocol.ApprovalResolveRequest) (protocol.ApprovalResolveReply, error) {
	if req.Outcome != protocol.ApprovalStateTimedOut && req.Outcome != protocol.ApprovalStateCancelled {
		return protocol.ApprovalResolveReply{}, protocol.Errorf(protocol.Invalid, "outcome must be %q or %q",
			protocol.ApprovalStateTimedOut, protocol.ApprovalStateCancelled)
	}
	if !protocol.ValidID(req.RequestID) {
		return protocol.ApprovalResolveReply{}, errNoPending
	}
	changed := false
	e, err := s.pending.transition(ctx, req.RequestID, func(e *protocol.PendingApproval) (bool, error) {
		changed = !protocol.ApprovalFinal(e.State)
		if changed {
			e.State, e.DecidedAt = req.Outcome, s.now().UnixMilli()
		}
		return changed, nil
	})
	if err == nil && changed {
		telemetry.Approvals.WithLabelValues(req.Outcome).Inc()
	}
	if errors.Is(err, errNoEntry) {
		return protocol.ApprovalResolveReply{}, errNoPending
	}
	if err != nil {
		return protocol.ApprovalResolveReply{}, err
	}
	return protocol.ApprovalResolveReply{State: e.State}, nil
}

// cancelTurn denies every approval of a turn that still waits. A claimed
// approval is left alone: the human's "always allow" is being recorded and
// wins.
func (s *Service) cancelTurn(ctx context.Context, req protocol.ApprovalCancelTurnRequest) (protocol.ApprovalCancelTurnReply, error) {
	if !protocol.ValidID(req.TurnID) {
		return protocol.ApprovalCancelTurnReply{}, protocol.Errorf(protocol.Invalid, "invalid turn id")
	}
	entries, _, err := s.pending.all(ctx)
	if err != nil {
		return protocol.ApprovalCancelTurnReply{}, err
	}
	n := 0
	for _, e := range entries {
		if e.TurnID != req.TurnID || e.State != protocol.ApprovalStatePending {
			continue
		}
		changed := false
		_, err := s.pending.transition(ctx, e.RequestID, func(e *protocol.PendingApproval) (bool, error) {
			changed = e.State == protocol.ApprovalStatePending
			if changed {
				e.State, e.DecidedAt = protocol.ApprovalStateCancelled, s.now().UnixMilli()
			}
			return changed, nil
		})
		if err != nil && !errors.Is(err, errNoEntry) {
			return protocol.ApprovalCancelTurnReply{Cancelled: n}, err
		}
		if err == nil && changed {
			n++
			telemetry.Approvals.WithLabelValues(protocol.ApprovalStateCancelled).Inc()
		}
	}
	return protocol.ApprovalCancelTurnReply{Cancelled: n}, nil
}

// listPending lists what waits for a human, oldest first. An entry past
// its deadline is not listed: it can no longer be approved.
func (s *Service) listPending(ctx context.Context, _ protocol.Empty) (protocol.ApprovalPendingReply, error) {
	entries, _, err := s.pending.all(ctx)
	if err != nil {
		return protocol.ApprovalPendingReply{}, err
	}
	now := s.now().UnixMilli()
	out := []protocol.PendingApproval{}
	for _, e := range entries {
		if e.State == protocol.ApprovalStatePending && now < e.Deadline {
			out = append(out, e.PendingApproval)
		}
	}
	slices.SortStableFunc(out, func(a, b protocol.PendingApproval) int {
		return cmp.Or(cmp.Compare(a.Timestamp, b.Timestamp), strings.Compare(a.RequestID, b.RequestID))
	})
	return protocol.ApprovalPendingReply{Pending: out}, nil
}

func (s *Service) listGrants(_ context.Context, _ protocol.Empty) (protocol.ApprovalGrantsReply, error) {
	list := s.grants.List()
	out := make([]protocol.ApprovalGrant, len(list))
	for i, g := range list {
		out[i] = protocol.ApprovalGrant{
			ID: g.ID, ToolName: g.ToolName, TargetKey: g.TargetKey, SourceWorkspaceID: g.SourceWorkspaceID,
			Description: g.Description, GrantedAt: g.GrantedAt, ExpiresAt: g.ExpiresAt,
		}
	}
	return protocol.ApprovalGrantsReply{Grants: out}, nil
}

func (s *Service) revokeGrant(_ context.Context, req protocol.ApprovalRevokeRequest) (protocol.Empty, error) {
	ok, err := s.grants.Revoke(req.ID)
	if errors.Is(err, grants.ErrNotDurable) {
		// Revoked and in the file, only the directory sync failed.
		s.log.Warn("grant revoked but not synced", "grant", req.ID, "err", err)
		ok, err = true, nil
	}
	if err != nil {
		return protocol.Empty{}, fmt.Errorf("approval: revoke: %w", err)
	}
	if !ok {
		return protocol.Empty{}, errGrantNotFound
	}
	return protocol.Empty{}, nil
}

func (s *Service) clearGrants(_ context.Context, _ protocol.Empty) (protocol.Empty, error) {
	if err := s.grants.Clear(); err != nil && !errors.Is(err, grants.ErrNotDurable) {
		return protocol.Empty{}, fmt.Errorf("approval: clear grants: %w", err)
	}
	return protocol.Empty{}, nil
}
