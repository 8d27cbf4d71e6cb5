package service

import (
	"context"

	"golang.org/x/crypto/bcrypt"

	"herald/store"
	"herald/store/storage"
)

// SignUpInput is what a new user supplies.
type SignUpInput struct {
	Handle      string
	Password    string
	DisplayName string
}

// SignUp creates a user. It returns BAD_USER_INPUT for an invalid handle,
// password or display name and CONFLICT for a taken handle.
func (s *Service) SignUp(ctx context.Context, in SignUpInput) (*store.User, error) {
	handle, err := store.NormalizeHandle(in.Handle)
	if err != nil {
		return nil, err
	}
	if err := store.ValidatePassword(in.Password); err != nil {
		return nil, err
	}
	name, err := store.NormalizeDisplayName(in.DisplayName, handle)
	if err != nil {
		return nil, err
	}
	var hash []byte
	if werr := s.passwords.do(ctx, func() { hash, err = store.HashPassword(in.Password, s.opts.PasswordCost) }); werr != nil {
		return nil, werr
	}
	if err != nil {
		return nil, err
	}
	now := s.clock()
	u := &store.User{ID: store.NewID(now), Handle: handle, DisplayName: name, PasswordHash: hash, CreatedAt: now, LastSeenAt: now, NeverBlocked: true}
	if err := s.backend.CreateUser(ctx, u); err != nil {
		return nil, err
	}
	return u, nil
}

// LogIn checks a handle and password. Any mismatch, including an unknown
// handle, is UNAUTHENTICATED with the same message.
func (s *Service) LogIn(ctx context.Context, handle, password string) (*store.User, error) {
	bad := store.Errorf(store.EUNAUTHENTICATED, "wrong handle or password")
	h, err := store.NormalizeHandle(handle)
	if err != nil {
		return nil, bad
	}
	u, err := s.backend.FindUserByHandle(ctx, h)
	return s.matchPassword(ctx, u, err, password, bad)
}

var dummyHash, _ = bcrypt.GenerateFromPassword([]byte("herald-timing-equalizer"), bcrypt.DefaultCost)

// FindUserByID returns a user or NOT_FOUND.
func (s *Service) FindUserByID(ctx context.Context, id store.ID) (*store.User, error) {
	return s.backend.FindUserByID(ctx, id)
}

// FindUsersByIDs returns users aligned with ids, nil where missing.
func (s *Service) FindUsersByIDs(ctx context.Context, ids []store.ID) ([]*store.User, error) {
	return s.backend.FindUsersByIDs(ctx, ids)
}

// FindUserByHandle returns a user by handle (any case) or NOT_FOUND.
func (s *Service) FindUserByHandle(ctx context.Context, handle string) (*store.User, error) {
	h, err := store.NormalizeHandle(handle)
	if err != nil {
		return nil, store.Errorf(store.ENOTFOUND, "user not found")
	}
	return s.backend.FindUserByHandle(ctx, h)
}

// ProfileInput is a change to a user's profile: nil fields stay as they
// are, an empty Bio, WebsiteURL or AvatarURL clears it.
type ProfileInput struct {
	DisplayName *string
	Bio         *string
	WebsiteURL  *string
	AvatarURL   *string
}

// UpdateProfile checks and applies a change to viewer's profile and returns
// the user. Invalid input, a blank display name included, is
// BAD_USER_INPUT and changes nothing.
func (s *Service) UpdateProfile(ctx context.Context, viewer store.ID, in ProfileInput) (*store.User, error) {
	var upd storage.UserUpdate
	if in.DisplayName != nil {
		if store.Blank(*in.DisplayName) {
			return nil, store.Errorf(store.EINVALID, "display name must not be empty")
		}
		name, err := store.NormalizeDisplayName(*in.DisplayName, "")
		if err != nil {
			return nil, err
		}
		upd.DisplayName = &name
	}
	if in.Bio != nil {
		bio, err := store.NormalizeBio(*in.Bio)
		if err != nil {
			return nil, err
		}
		upd.Bio = &bio
	}
	for _, f := range []struct {
		what    string
		in      *string
		checked **string
	}{{"website URL", in.WebsiteURL, &upd.WebsiteURL}, {"avatar URL", in.AvatarURL, &upd.AvatarURL}} {
		if f.in == nil {
			continue
		}
		u, err := store.NormalizeProfileURL(f.what, *f.in)
		if err != nil {
			return nil, err
		}
		*f.checked = &u
	}
	return s.backend.UpdateUser(ctx, viewer, upd)
}
