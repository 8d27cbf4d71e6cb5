package service

import (
	"context"

	"herald/store"
)

// SetAttributes applies changes to the viewer's custom attributes and
// returns the user. Names are 1–64 characters of any text (including `$`
// and `.`: they are stored under tokens), values at most 1 KiB; a user has
// at most MaxAttributes. Invalid input is BAD_USER_INPUT.
func (s *Service) SetAttributes(ctx context.Context, viewer store.ID, changes []store.AttributeChange) (*store.User, error) {
	if err := store.ValidateAttributeChanges(changes); err != nil {
		return nil, err
	}
	return s.backend.SetAttributes(ctx, viewer, changes)
}

// FindUsersByAttribute returns a page of users whose attribute name equals
// value, in ID order, within r, and whether more lie beyond it.
func (s *Service) FindUsersByAttribute(ctx context.Context, name, value string, r store.Range) ([]*store.User, bool, error) {
	if err := store.ValidateAttribute(name, &value); err != nil {
		return nil, false, err
	}
	return readPage(r, func(r store.Range) ([]*store.User, error) { return s.backend.FindUsersByAttribute(ctx, name, value, r) })
}

// CountUsersByAttribute counts the users whose attribute name equals value.
func (s *Service) CountUsersByAttribute(ctx context.Context, name, value string) (int, error) {
	if err := store.ValidateAttribute(name, &value); err != nil {
		return 0, err
	}
	return s.backend.CountUsersByAttribute(ctx, name, value)
}
