package store

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	"github.com/redis/go-redis/v9"
	"github.com/sluicehq/sluice/flows"
)

// Files keeps the files runs take as input by reference (uploads, documents): a run's
// state holds a flows.FileInfo, never the bytes (no large payload travels through the
// streams). Every file has a meta hash in Redis with its time to live; its bytes are in
// Redis too when it is small or no object store is configured, else in an S3-compatible
// object store (AWS S3, MinIO, Ceph, R2, …). A file whose meta hash expired is gone
// whatever its object store still holds: objects past their time are deleted as later
// files are stored (a bucket lifecycle rule is a good second line).
type Files struct {
	r    *Redis
	opts FilesOptions
	s3   *minio.Client
}

// FilesOptions are the limits of the files and where large ones go.
type FilesOptions struct {
	// MaxBytes is the largest file (default 32 MiB).
	MaxBytes int64
	// TTL is how long a file is kept (default 24h).
	TTL time.Duration
	// InlineMax is the largest file kept in Redis when an object store is configured
	// (default 1 MiB); without one every file is.
	InlineMax int64
	// ObjectStore, when set, keeps the files larger than InlineMax.
	ObjectStore *ObjectStore
}

// ObjectStore is an S3-compatible bucket.
type ObjectStore struct {
	// Endpoint is host[:port]; Secure says https.
	Endpoint string
	Secure   bool
	Bucket   string
	// Prefix starts every object's key ("" or ending in "/").
	Prefix string
	Region string
	// Creds sign the requests; nil reads them from the environment: AWS_ACCESS_KEY_ID
	// and AWS_SECRET_ACCESS_KEY (or MINIO_ROOT_USER, MINIO_ROOT_PASSWORD), the AWS
	// credentials file, then the instance's IAM role.
	Creds *credentials.Credentials
}

// ParseObjectStore reads an object store's URL: http(s)://HOST[:PORT]/BUCKET[/PREFIX]
// for a server addressed by path (MinIO, Ceph, a local S3), or s3://BUCKET[/PREFIX] for
// AWS S3 (region from ?region= or AWS_REGION). Credentials never go in the URL.
func ParseObjectStore(raw string, env func(string) string) (*ObjectStore, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("object store %q: %v", raw, err)
	}
	if u.User != nil {
		return nil, errors.New("object store: the URL carries credentials; set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY instead")
	}
	o := &ObjectStore{Region: u.Query().Get("region")}
	if o.Region == "" && env != nil {
		o.Region = env("AWS_REGION")
	}
	p := strings.Trim(u.Path, "/")
	switch u.Scheme {
	case "http", "https":
		o.Endpoint, o.Secure = u.Host, u.Scheme == "https"
		o.Bucket, o.Prefix, _ = strings.Cut(p, "/")
	case "s3":
		o.Endpoint, o.Secure, o.Bucket, o.Prefix = "s3.amazonaws.com", true, u.Host, p
		if o.Region != "" {
			o.Endpoint = "s3." + o.Region + ".amazonaws.com"
		}
	default:
		return nil, fmt.Errorf("object store %q: want http(s)://HOST/BUCKET/PREFIX or s3://BUCKET/PREFIX", raw)
	}
	if o.Endpoint == "" || o.Bucket == "" {
		return nil, fmt.Errorf("object store %q: name the host and the bucket", raw)
	}
	if o.Prefix != "" {
		o.Prefix = strings.TrimSuffix(o.Prefix, "/") + "/"
	}
	return o, nil
}

// NewFiles returns the files on r (and the object store, when opts has one).
func NewFiles(r *Redis, opts FilesOptions) (*Files, error) {
	if opts.MaxBytes <= 0 {
		opts.MaxBytes = 32 << 20
	}
	if opts.TTL <= 0 {
		opts.TTL = 24 * time.Hour
	}
	if opts.InlineMax <= 0 {
		opts.InlineMax = 1 << 20
	}
	f := &Files{r: r, opts: opts}
	if o := opts.ObjectStore; o != nil {
		creds := o.Creds
		if creds == nil {
			creds = credentials.NewChainCredentials([]credentials.Provider{
				&credentials.EnvAWS{}, &credentials.EnvMinio{}, &credentials.FileAWSCredentials{}, &credentials.IAM{}})
		}
		c, err := minio.New(o.Endpoint, &minio.Options{Creds: creds, Secure: o.Secure, Region: o.Region})
		if err != nil {
			return nil, fmt.Errorf("object store %s: %w", o.Endpoint, err)
		}
		f.s3 = c
	}
	return f, nil
}

// Options are the limits the files were opened with (defaults filled in).
func (f *Files) Options() FilesOptions { return f.opts }

// CheckObjectStore reports whether the bucket answers, for a start-up check.
func (f *Files) CheckObjectStore(ctx context.Context) error {
	if f.s3 == nil {
		return nil
	}
	ok, err := f.s3.BucketExists(ctx, f.opts.ObjectStore.Bucket)
	if err != nil {
		return fmt.Errorf("object store %s: %w", f.opts.ObjectStore.Endpoint, err)
	}
	if !ok {
		return fmt.Errorf("object store %s: there is no bucket %q", f.opts.ObjectStore.Endpoint, f.opts.ObjectStore.Bucket)
	}
	return nil
}

var fileIDPattern = regexp.MustCompile(`^[0-9a-f]{32}$`)

// ValidFileID says whether id can name a file.
func ValidFileID(id string) bool { return fileIDPattern.MatchString(id) }

func (f *Files) objectKey(flow, id string) string {
	return f.opts.ObjectStore.Prefix + flow + "/" + id
}

// ErrFileTooLarge is the error of a file above MaxBytes.
var ErrFileTooLarge error = &flows.Error{Code: flows.TooLarge, Message: "the file is too large"}

// Put keeps a file for flow's runs and returns what describes it.
func (f *Files) Put(ctx context.Context, flow, name, contentType string, data []byte) (flows.FileInfo, error) {
	if int64(len(data)) > f.opts.MaxBytes {
		return flows.FileInfo{}, fmt.Errorf("%w: %d bytes, the limit is %d", ErrFileTooLarge, len(data), f.opts.MaxBytes)
	}
	var b [16]byte
	_, _ = rand.Read(b[:])
	sum := sha256.Sum256(data)
	now := time.Now().UTC().Truncate(time.Millisecond)
	info := flows.FileInfo{ID: hex.EncodeToString(b[:]), Flow: flow, Name: name, ContentType: contentType, Size: int64(len(data)),
		SHA256: hex.EncodeToString(sum[:]), Created: now, Expires: now.Add(f.opts.TTL), Where: "redis"}
	k := FileKeysOf(flow, info.ID)
	if f.s3 != nil && info.Size > f.opts.InlineMax {
		info.Where = "s3"
		_, err := f.s3.PutObject(ctx, f.opts.ObjectStore.Bucket, f.objectKey(flow, info.ID), bytes.NewReader(data), info.Size,
			minio.PutObjectOptions{ContentType: contentType})
		if err != nil {
			return flows.FileInfo{}, fmt.Errorf("files: object store: %w", err)
		}
		if err := f.r.Client.ZAdd(ctx, filesExpiryKey, redis.Z{Score: float64(info.Expires.UnixMilli()), Member: flow + "/" + info.ID}).Err(); err != nil {
			return flows.FileInfo{}, fmt.Errorf("files: %w", err)
		}
	}
	pipe := f.r.Client.TxPipeline()
	pipe.HSet(ctx, k.Meta(), metaFields(info))
	pipe.PExpire(ctx, k.Meta(), f.opts.TTL)
	if info.Where == "redis" {
		pipe.Set(ctx, k.Data(), data, f.opts.TTL)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return flows.FileInfo{}, fmt.Errorf("files: %w", err)
	}
	f.sweep(ctx)
	return info, nil
}

func metaFields(i flows.FileInfo) map[string]any {
	return map[string]any{"id": i.ID, "flow": i.Flow, "name": i.Name, "content_type": i.ContentType, "size": i.Size,
		"sha256": i.SHA256, "created": i.Created.UnixMilli(), "expires": i.Expires.UnixMilli(), "where": i.Where}
}

// ErrFileNotFound is the error of a file that is not kept (never was, or expired).
var ErrFileNotFound error = &flows.Error{Code: flows.NotFound, Message: "no such file (it may have expired)"}

// Stat describes a file.
func (f *Files) Stat(ctx context.Context, flow, id string) (flows.FileInfo, error) {
	if !ValidFileID(id) {
		return flows.FileInfo{}, ErrFileNotFound
	}
	h, err := f.r.Client.HGetAll(ctx, FileKeysOf(flow, id).Meta()).Result()
	if err != nil {
		return flows.FileInfo{}, fmt.Errorf("files: %w", err)
	}
	if len(h) == 0 {
		return flows.FileInfo{}, ErrFileNotFound
	}
	size, _ := strconv.ParseInt(h["size"], 10, 64)
	created, _ := strconv.ParseInt(h["created"], 10, 64)
	expires, _ := strconv.ParseInt(h["expires"], 10, 64)
	return flows.FileInfo{ID: h["id"], Flow: h["flow"], Name: h["name"], ContentType: h["content_type"], Size: size, SHA256: h["sha256"],
		Created: time.UnixMilli(created).UTC(), Expires: time.UnixMilli(expires).UTC(), Where: h["where"]}, nil
}

// Open returns a file and its bytes.
func (f *Files) Open(ctx context.Context, flow, id string) (flows.FileInfo, []byte, error) {
	info, err := f.Stat(ctx, flow, id)
	if err != nil {
		return flows.FileInfo{}, nil, err
	}
	var data []byte
	switch info.Where {
	case "s3":
		if f.s3 == nil {
			return flows.FileInfo{}, nil, fmt.Errorf("files: %s is in an object store this process was not given (--files-store)", id)
		}
		obj, err := f.s3.GetObject(ctx, f.opts.ObjectStore.Bucket, f.objectKey(flow, id), minio.GetObjectOptions{})
		if err != nil {
			return flows.FileInfo{}, nil, fmt.Errorf("files: object store: %w", err)
		}
		defer obj.Close()
		data, err = io.ReadAll(io.LimitReader(obj, info.Size+1))
		if err != nil {
			var me minio.ErrorResponse
			if errors.As(err, &me) && me.Code == "NoSuchKey" {
				return flows.FileInfo{}, nil, ErrFileNotFound
			}
			return flows.FileInfo{}, nil, fmt.Errorf("files: object store: %w", err)
		}
	default:
		data, err = f.r.Client.Get(ctx, FileKeysOf(flow, id).Data()).Bytes()
		if errors.Is(err, redis.Nil) {
			return flows.FileInfo{}, nil, ErrFileNotFound
		}
		if err != nil {
			return flows.FileInfo{}, nil, fmt.Errorf("files: %w", err)
		}
	}
	if int64(len(data)) != info.Size {
		return flows.FileInfo{}, nil, fmt.Errorf("files: %s has %d bytes, its record says %d", id, len(data), info.Size)
	}
	return info, data, nil
}

// Delete forgets a file and reports whether it was kept.
func (f *Files) Delete(ctx context.Context, flow, id string) (bool, error) {
	info, err := f.Stat(ctx, flow, id)
	if errors.Is(err, ErrFileNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if info.Where == "s3" && f.s3 != nil {
		if err := f.s3.RemoveObject(ctx, f.opts.ObjectStore.Bucket, f.objectKey(flow, id), minio.RemoveObjectOptions{}); err != nil {
			return false, fmt.Errorf("files: object store: %w", err)
		}
		f.r.Client.ZRem(ctx, filesExpiryKey, flow+"/"+id)
	}
	k := FileKeysOf(flow, id)
	if err := f.r.Client.Del(ctx, k.Meta(), k.Data()).Err(); err != nil {
		return false, fmt.Errorf("files: %w", err)
	}
	return true, nil
}

// sweepBatch is how many expired objects one Put deletes at most.
const sweepBatch = 20

// sweep deletes up to sweepBatch objects whose files expired. Their meta hashes are gone
// already (Redis expired them), so nothing can open them; this frees the bucket.
func (f *Files) sweep(ctx context.Context) {
	if f.s3 == nil {
		return
	}
	now := strconv.FormatInt(time.Now().UnixMilli(), 10)
	due, err := f.r.Client.ZRangeByScore(ctx, filesExpiryKey, &redis.ZRangeBy{Min: "-inf", Max: now, Count: sweepBatch}).Result()
	if err != nil {
		return
	}
	for _, m := range due {
		flow, id, ok := strings.Cut(m, "/")
		if ok && f.s3.RemoveObject(ctx, f.opts.ObjectStore.Bucket, f.objectKey(flow, id), minio.RemoveObjectOptions{}) != nil {
			continue // tried again by the next Put
		}
		f.r.Client.ZRem(ctx, filesExpiryKey, m)
	}
}
