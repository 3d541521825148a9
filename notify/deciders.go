package notify

import (
	"context"
	"errors"
	"slices"
)

// Who may decide: the routes of the configuration name the people whose
// clicks count (notify/decision carries the clicks out).

// MayDecide tells whether userID may decide r with its buttons: the
// owner, the rule's resolvers and the people the message escalates to (a
// user, or a member of a group). An owner given as e-mail counts once
// Slack resolved it.
func (s *Service) MayDecide(ctx context.Context, r *Record, userID string) (bool, error) {
	return s.routeNames(ctx, r.Owner, s.cfg.routeFor(r), userID) // the owner it was sent to
}

// MayDecideNamespace is the one rule of what a Slack user may decide about
// a namespace's keys: they may when the namespace's route names them (its
// owner, resolvers or escalation steps; the default owner for a namespace
// without one), as for its stuck keys' messages. It is the Slack side of
// the namespaces a token or a signed-in person may use in the API and the
// console: whatever a click does to keys beyond its own message's key
// (an execution's keys at their re-run gate) asks it of each namespace.
func (s *Service) MayDecideNamespace(ctx context.Context, ns, userID string) (bool, error) {
	rt := s.cfg.forRoute(s.cfg.Namespaces, ns)
	return s.routeNames(ctx, rt.Owner, rt, userID)
}

// routeNames tells whether owner, or rt's resolvers or escalation steps,
// name userID: a user or a member of a group.
func (s *Service) routeNames(ctx context.Context, owner string, rt route, userID string) (bool, error) {
	if userID == "" {
		return false, nil
	}
	who := append([]string{owner}, rt.Resolvers...)
	for _, st := range rt.Escalation {
		who = append(who, st.To)
	}
	var groups []string
	for _, w := range who {
		switch {
		case w == userID:
			return true, nil
		case groupIDRE.MatchString(w):
			groups = append(groups, w)
		case ownerEmailRE.MatchString(w):
			if id, ok, _ := s.outbox.SlackUser(ctx, w); ok && id == userID {
				return true, nil
			}
		}
	}
	if len(groups) > 0 && s.slack == nil {
		return false, errors.New("user groups cannot be checked without SLACK_BOT_TOKEN")
	}
	for _, g := range slices.Compact(groups) {
		var members []string
		c, _, err := s.call(ctx, "usergroups.users.list", func() error {
			var err error
			members, err = s.slack.GroupMembers(ctx, g)
			return err
		})
		if c != classOK && c != ClassPermanent {
			return false, err
		}
		if slices.Contains(members, userID) {
			return true, nil
		}
	}
	return false, nil
}
